package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// BuiltinTokenizer is the name (AIPerf's) of the approximate tokenizer
// built in: one word counts as one token, as without a tokenizer at all.
const BuiltinTokenizer = "builtin"

// hubName is a Hugging Face repository id, ORG/NAME, as aiperf's
// --tokenizer takes it.
var hubName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// locateTokenizer finds the tokenizer.json that name (resolved, relative
// to the configuration's folder) stands for: the file itself; a folder's
// tokenizer.json (a model downloaded whole); or, for a hub name that is
// no path here, its newest snapshot in the Hugging Face cache, where
// `huggingface-cli download` put it. tokenprobe downloads nothing: a
// prober that fetched from the network at start would fail where the
// network is closed, and late.
func locateTokenizer(name, resolved string) (string, error) {
	fi, err := os.Stat(resolved)
	switch {
	case err == nil && fi.IsDir():
		p := filepath.Join(resolved, "tokenizer.json")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s is a folder without a tokenizer.json", resolved)
		}
		return p, nil
	case err == nil:
		return resolved, nil
	case !hubName.MatchString(name):
		return "", fmt.Errorf("%s: no such file (give a tokenizer.json, a folder holding one, a Hugging Face model id in the local cache, or %q for the approximate count)", resolved, BuiltinTokenizer)
	}
	cache := hfCache()
	snaps := filepath.Join(cache, "models--"+strings.ReplaceAll(name, "/", "--"), "snapshots")
	if ref, err := os.ReadFile(filepath.Join(cache, "models--"+strings.ReplaceAll(name, "/", "--"), "refs", "main")); err == nil {
		p := filepath.Join(snaps, strings.TrimSpace(string(ref)), "tokenizer.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if m, _ := filepath.Glob(filepath.Join(snaps, "*", "tokenizer.json")); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", fmt.Errorf("%q is a Hugging Face model id, neither a file here nor in the Hugging Face cache (%s), and tokenprobe downloads nothing: "+
		"fetch it with `huggingface-cli download %s tokenizer.json` (then it is found there), give a tokenizer.json's path, or %q for the approximate count",
		name, cache, name, BuiltinTokenizer)
}

// hfCache is the Hugging Face hub cache, where its libraries look:
// HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub
// (XDG_CACHE_HOME moving ~/.cache).
func hfCache() string {
	if c := os.Getenv("HF_HUB_CACHE"); c != "" {
		return c
	}
	if h := os.Getenv("HF_HOME"); h != "" {
		return filepath.Join(h, "hub")
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "huggingface", "hub")
}
