// Package setup takes a parsed configuration the rest of the way: the
// checks that need the files it names (tokenizers, datasets, traces) and
// the packages beyond the schema (the GPU fields tokenprobe exports), each
// error located at the field that named the file. config decodes and
// checks what the file says; setup checks what it points at.
// `tokenprobe check` is the two together, as serve and run load.
package setup

import (
	"fmt"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/sim"
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
	}
	errs.Sort()
	return errs
}
