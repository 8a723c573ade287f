package setup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// MaxReferenceBytes bounds a model-identity reference file read back: the
// largest a reference can be written is under a tenth of it.
const MaxReferenceBytes = 1 << 20

// IdentityPromptsOf are a model-identity profile's prompts.
func IdentityPromptsOf(mi *config.ModelIdentity) []string {
	return workload.IdentityPrompts[:min(mi.Prompts, len(workload.IdentityPrompts))]
}

// IdentityKey names a model-identity reference: the profile, the endpoint
// and the model asked for, and the probe's settings (other prompts or
// lengths are another reference).
func IdentityKey(p *config.Profile, ep *client.Endpoint) string {
	mi := p.ModelIdentity
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%d\x00%s", p.Name, ep.Name, ep.Model, mi.Prompts, mi.MaxTokens, mi.ReferencePath)
}

// NewIdentityTracker is the tracker of a model-identity profile against
// ep: its reference pinned from the profile's file, or learned and kept
// in a file of its own under dir ("" keeps it in memory only).
func NewIdentityTracker(p *config.Profile, ep *client.Endpoint, dir string) (*stats.IdentityTracker, error) {
	mi := p.ModelIdentity
	prompts := IdentityPromptsOf(mi)
	if mi.ReferencePath != "" {
		ref, err := ReadIdentityReference(mi.ReferencePath, len(prompts))
		if err != nil {
			return nil, err
		}
		return stats.NewIdentityTracker(prompts, mi.LearnRuns, mi.MinAgreement, mi.MaxLogprobDistance, nil, ref), nil
	}
	var store stats.IdentityStore
	if dir != "" {
		sum := sha256.Sum256([]byte(IdentityKey(p, ep)))
		store = &IdentityFile{Path: filepath.Join(dir, "model-identity", hex.EncodeToString(sum[:12])+".json"), Key: fmt.Sprintf("%s on %s (%s)", p.Name, ep.Name, ep.Model)}
	}
	return stats.NewIdentityTracker(prompts, mi.LearnRuns, mi.MinAgreement, mi.MaxLogprobDistance, store, nil), nil
}

// identityFile is a reference as written: what it is of, beside it.
type identityFile struct {
	Of string `json:"of"`
	stats.IdentityReference
}

// ReadIdentityReference reads a reference file (at most
// MaxReferenceBytes) of prompts prompts, refusing one outside the bounds
// a reference is written within.
func ReadIdentityReference(path string, prompts int) (*stats.IdentityReference, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxReferenceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxReferenceBytes {
		return nil, fmt.Errorf("%s: over %d bytes: no reference is that large", path, MaxReferenceBytes)
	}
	var ref identityFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		return nil, fmt.Errorf("%s: not a model-identity reference: %w", path, err)
	}
	if err := ref.IdentityReference.Check(prompts); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &ref.IdentityReference, nil
}

// IdentityFile keeps one reference in a file, written whole to a file
// beside it and renamed over it: a crash leaves the old one or the new.
type IdentityFile struct {
	Path, Key string
}

// Load reads the reference; none is there before the first is learned.
func (f *IdentityFile) Load() (*stats.IdentityReference, error) {
	ref, err := ReadIdentityReference(f.Path, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return ref, err
}

// Save writes ref.
func (f *IdentityFile) Save(ref *stats.IdentityReference) error {
	b, err := json.MarshalIndent(identityFile{Of: f.Key, IdentityReference: *ref}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return err
	}
	tmp := f.Path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.Path)
}

// Forget removes the reference.
func (f *IdentityFile) Forget() error {
	if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
