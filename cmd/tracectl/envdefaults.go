package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// envDefaults are the flags an environment variable may default, so an MCP
// client's launch line need not repeat them. A flag given on the command
// line wins; a variable set to the empty string is ignored. bundle-dir is
// not taken from the environment when --bundle names one bundle.
var envDefaults = []struct {
	flag, env string
	unless    string // a flag that, given, makes this default not apply
}{
	{"key", "TRACECTL_KEY", "signer"},
	{"trusted-key", "TRACECTL_TRUSTED_KEY", ""},
	{"bundle-dir", "TRACECTL_BUNDLE_DIR", "bundle"},
	{"retain", "TRACECTL_RETAIN", ""},
	{"durability", "TRACECTL_DURABILITY", ""},
	{"capture", "TRACECTL_CAPTURE", ""},
}

// lookupEnv is the environment envDefaults read (a test's own, in tests).
var lookupEnv = os.LookupEnv

// applyEnvDefaults sets c's flags that were not given from their
// environment variables, and those not set there from the config file
// (config.go), which a command taking none of these flags never reads. A
// value the flag refuses, and a config file that cannot be used, are
// usage errors naming the variable or the file and line.
func applyEnvDefaults(c *cobra.Command) error {
	fs := c.Flags()
	var cfg *config
	for _, d := range envDefaults {
		if fs.Lookup(d.flag) != nil {
			var err error
			if cfg, err = loadConfig(); err != nil {
				return usageErr(err, "fix the file, or point $"+configEnv+" at another (tracectl help config)")
			}
			break
		}
	}
	for _, d := range envDefaults {
		f := fs.Lookup(d.flag)
		if f == nil || f.Changed || (d.unless != "" && fs.Changed(d.unless)) {
			continue
		}
		if v, ok := lookupEnv(d.env); ok && v != "" {
			if err := fs.Set(d.flag, v); err != nil {
				return usageErr(fmt.Errorf("$%s: %w", d.env, err), "unset it or give --"+d.flag+" on the command line")
			}
			continue
		}
		if cfg == nil {
			continue
		}
		if v, ok := cfg.values[d.flag]; ok {
			if err := fs.Set(d.flag, v.value); err != nil {
				return usageErr(&configError{File: cfg.file, Line: v.line, Err: fmt.Errorf("%w: %s: %w", errConfigValue, d.flag, err)}, "")
			}
		}
	}
	return nil
}
