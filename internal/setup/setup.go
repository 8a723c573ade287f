// Package setup takes a parsed configuration the rest of the way: the
// checks that need the files it names (tokenizers, datasets, traces) and
// the packages beyond the schema (the GPU fields tokenprobe exports), each
// error located at the field that named the file. config decodes and
// checks what the file says; setup checks what it points at.
// `tokenprobe check` is the two together, as serve and run load.
package setup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/regexcost"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/tokenizer"
)

// LoadFile reads, validates and checks the file at path.
func LoadFile(path string) (*config.Config, error) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return checked(cfg)
}

// Parse validates and checks data as read from file.
func Parse(file string, data []byte) (*config.Config, error) {
	cfg, err := config.Parse(file, data)
	if err != nil {
		return nil, err
	}
	return checked(cfg)
}

// CheckFile is `tokenprobe check`: LoadFile, except that a secret it
// cannot read is a warning (config.CheckFile).
func CheckFile(path string) (*config.Config, config.Errors, error) {
	cfg, warns, err := config.CheckFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err = checked(cfg)
	return cfg, warns, err
}

func checked(cfg *config.Config) (*config.Config, error) {
	if errs := Check(cfg); len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
}

// Check reads every file cfg names, as runs will, and checks the GPU
// fields. It returns the errors in file order, none when all is well.
func Check(cfg *config.Config) config.Errors {
	var errs config.Errors
	errf := func(path, format string, args ...any) { errs = append(errs, cfg.Errorf(path, format, args...)) }
	if g := cfg.GPU; g != nil {
		for i, f := range g.Fields {
			if _, ok := gpu.ByName(f); !ok {
				errf(fmt.Sprintf("gpu.fields[%d]", i), "%q is not a DCGM field tokenprobe exports", f)
			}
		}
	}
	for i, e := range cfg.Endpoints {
		if s := e.Simulator; s != nil && s.AnswersPath != "" {
			if _, err := sim.LoadAnswers(s.AnswersPath); err != nil {
				errf(fmt.Sprintf("endpoints[%d].simulator.answers", i), "%v", err)
			}
		}
	}
	for i, p := range cfg.Profiles {
		path := fmt.Sprintf("profiles[%d].workload", i)
		w := &p.Workload
		if w.TokenizerPath != "" && w.Trace == nil && w.Dataset == nil {
			if _, err := tokenizer.Shared(w.TokenizerPath); err != nil {
				errf(path+".tokenizer", "%v", err)
			}
		}
		if d := w.Dataset; d != nil && d.Path != "" {
			var err error
			if d.Format == "multi_turn" {
				_, err = multiTurn.get(d.Path)
			} else {
				_, err = singleTurn.get(d.Path)
			}
			if err != nil {
				errf(path+".dataset.file", "%v", err)
			}
		}
		if t := w.Trace; t != nil && t.Path != "" {
			if _, err := mooncake.get(t.Path); err != nil {
				errf(path+".trace.file", "%v", err)
			}
		}
		if s := p.Checks.SchemaPath; s != "" {
			if _, _, err := LoadSchema(s); err != nil {
				errf(fmt.Sprintf("profiles[%d].checks.json_schema", i), "%v", err)
			}
		}
		if p.Checks.ToolsPath != "" {
			if _, _, err := ToolsOf(&p.Checks); err != nil {
				errf(fmt.Sprintf("profiles[%d].checks.tools", i), "%v", err)
			}
		}
		for _, e := range judgingCost(&p.Checks) {
			errf(fmt.Sprintf("profiles[%d].checks%s", i, e.field), "%s", e.msg)
		}
		if mi := p.ModelIdentity; mi != nil {
			for j, name := range p.Endpoints {
				if e := cfg.Endpoint(name); e != nil && openai.Of(openai.API(e.API)).Greedy == nil {
					errf(fmt.Sprintf("profiles[%d].endpoints[%d]", i, j), "endpoint %q speaks %s, which tokenprobe cannot ask to decode greedily (temperature 0): a model_identity profile needs chat, completions, responses or messages", name, e.API)
				}
			}
			if mi.ReferencePath != "" {
				if _, err := ReadIdentityReference(mi.ReferencePath, len(IdentityPromptsOf(mi))); err != nil {
					errf(fmt.Sprintf("profiles[%d].model_identity.reference", i), "%v", err)
				}
			}
		}
	}
	errs.Sort()
	return errs
}

// fieldError is an error of one field below a block.
type fieldError struct{ field, msg string }

// judgingCost is what is wrong with the cost of judging one answer by c:
// a schema's pattern that alone costs too much a byte, or every
// expression of the set, added up, over regexcost.MaxTotalInsts.
func judgingCost(c *config.Checks) []fieldError {
	var errs []fieldError
	type part struct {
		what  string
		insts int
	}
	var parts []part
	add := func(what string, exprs []string) {
		n := 0
		for _, e := range exprs {
			n += regexcost.Insts(e)
		}
		if n > 0 {
			parts = append(parts, part{what, n})
		}
	}
	add("matches", c.Matches)
	add("not_matches", c.NotMatches)
	for _, f := range []struct{ field, path string }{{".json_schema", c.SchemaPath}, {".tools", c.ToolsPath}} {
		if f.path == "" {
			continue
		}
		doc, err := readSchemaJSON(f.path)
		if err != nil {
			continue // said by its own check
		}
		pats := schemaPatterns(doc, nil)
		for _, pat := range pats {
			if why := regexcost.Why(pat); why != "" {
				errs = append(errs, fieldError{f.field, fmt.Sprintf("the pattern %q %s", pat, why)})
			}
		}
		add(strings.TrimPrefix(f.field, ".")+" patterns", pats)
	}
	total := 0
	var each []string
	for _, p := range parts {
		total += p.insts
		each = append(each, fmt.Sprintf("%s %d", p.what, p.insts))
	}
	if total > regexcost.MaxTotalInsts && len(errs) == 0 && !overOne(c) {
		errs = append(errs, fieldError{"", fmt.Sprintf("judging one answer runs expressions of %d instructions in all (%s), over the %d allowed: about %.1f s of CPU a MB of answer at worst; use fewer or smaller expressions",
			total, strings.Join(each, ", "), regexcost.MaxTotalInsts, regexcost.SecondsPerMB(total))})
	}
	return errs
}

// schemaPatterns appends to out every regular expression a JSON Schema
// document runs on a value: its pattern keywords and its
// patternProperties' names, at any depth.
func schemaPatterns(doc any, out []string) []string {
	switch v := doc.(type) {
	case map[string]any:
		for k, sub := range v {
			switch k {
			case "pattern":
				if p, ok := sub.(string); ok {
					out = append(out, p)
					continue
				}
			case "patternProperties":
				if m, ok := sub.(map[string]any); ok {
					for name := range m {
						out = append(out, name)
					}
				}
			}
			out = schemaPatterns(sub, out)
		}
	case []any:
		for _, sub := range v {
			out = schemaPatterns(sub, out)
		}
	}
	return out
}

// overOne reports whether one of c's expressions is over its own bound,
// which the configuration's check says.
func overOne(c *config.Checks) bool {
	for _, e := range append(slices.Clone(c.Matches), c.NotMatches...) {
		if regexcost.Why(e) != "" {
			return true
		}
	}
	return false
}
