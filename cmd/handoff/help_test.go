package main

import (
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// TestUsageColumns: "handoff --help" lines its summaries up in one column,
// whatever the length of the longest command name.
func TestUsageColumns(t *testing.T) {
	out := mustRun(t, "--help")
	col := -1
	for _, c := range commands() {
		prefix := "  " + c.name + " "
		i := strings.Index(out, prefix)
		if i < 0 {
			t.Fatalf("--help lacks %s:\n%s", c.name, out)
		}
		line, _, _ := strings.Cut(out[i:], "\n")
		at := strings.Index(line, c.summary)
		if col < 0 {
			col = at
		}
		if at != col || at <= len(prefix) {
			t.Fatalf("the summary of %s starts at column %d, the first at %d:\n%s", c.name, at, col, out)
		}
	}
}

// TestHelpSaysDashDash: every command's --help opens with its synopsis in
// the command table and writes every flag as --flag, as the synopses and
// the messages do; each flag a synopsis names is listed.
func TestHelpSaysDashDash(t *testing.T) {
	singleDash := regexp.MustCompile(`(?m)(^|[\s\[|(])-[a-z]`)
	flagName := regexp.MustCompile(`--[a-z][a-z-]*`)
	subcommands := map[string][]string{
		"keys": {"gen"}, "card": {"verify", "show"}, "push": {"status", "retry"}, "store": {"recover"}, "webhook": {"listen"}, "policy": {"explain", "check", "grants"},
	}
	for _, c := range commands() {
		names := []string{c.name}
		if subs, ok := subcommands[c.name]; ok {
			names = nil
			for _, s := range subs {
				names = append(names, c.name+" "+s)
			}
			out := mustRun(t, c.name, "--help")
			for _, s := range c.synopses {
				if !strings.Contains(out, "handoff "+c.name+" "+s+"\n") {
					t.Errorf("%s --help lacks %q:\n%s", c.name, s, out)
				}
			}
		}
		for _, name := range names {
			out, _, err := runCLI(t.Context(), append(strings.Fields(name), "--help")...)
			if !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s --help: %v, want flag.ErrHelp", name, err)
			}
			syn := synopsis(name)
			if want := "Usage: handoff " + name + " " + syn + "\n"; !strings.HasPrefix(out, want) {
				t.Errorf("%s --help starts %q, want %q", name, firstLine(out), want)
			}
			// pprof's own flags are written its way.
			if m := singleDash.FindString(strings.ReplaceAll(out, "pprof -tagfocus", "")); m != "" {
				t.Errorf("%s --help writes a flag with one dash (%q):\n%s", name, m, out)
			}
			for _, f := range flagName.FindAllString(syn, -1) {
				if !strings.Contains(out, "\n  "+f+" ") && !strings.Contains(out, "\n  "+f+"\n") {
					t.Errorf("%s --help does not list %s:\n%s", name, f, out)
				}
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestFlagMistake: a mistake on the command line is one error that names
// the flag as it is written (--flag) and points at --help; nothing goes to
// stdout, where the flag package would print the whole help.
func TestFlagMistake(t *testing.T) {
	for args, want := range map[string]string{
		"ledger --nope":          "ledger: flag provided but not defined: --nope (see handoff ledger --help)",
		"get --timeout soon":     `get: invalid value "soon" for flag --timeout: parse error (see handoff get --help)`,
		"send --stream=maybe":    `send: invalid boolean value "maybe" for --stream: parse error (see handoff send --help)`,
		"push status --data-dir": "push status: flag needs an argument: --data-dir (see handoff push status --help)",
	} {
		out, errOut, err := runCLI(t.Context(), strings.Fields(args)...)
		if exitCode(err) != 2 || err.Error() != want || out != "" || errOut != "" {
			t.Errorf("handoff %s: %v (exit %d), stdout %q, stderr %q; want exit 2 and %q alone", args, err, exitCode(err), out, errOut, want)
		}
	}
}
