// Package datadir names the files an agent keeps in its data directory
// (config data_dir, serve --data-dir), so that the agent that writes them and
// the CLI commands that read a stopped agent's data agree on one list, and
// tells a directory that holds an agent's data from one that does not.
//
// The CLI reads a data directory only after [Check] accepts it: opening a
// store in the wrong directory would create an empty one there and report
// nothing, which reads as "the agent did nothing".
package datadir
