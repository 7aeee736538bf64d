// Package script is a deterministic OpenAI-compatible Chat Completions server driven by a
// script of rules: it reads the tools and messages it is sent and answers with tool calls and
// text, like a real model would, so that tests and the demo run without one.
//
// A request is answered by the first rule whose conditions all hold:
//
//	rules:
//	  - when: {last: user, offered: "notes__add"}        # the user spoke; a tool matching the glob is offered
//	    calls: [{tool: "notes__add", arguments: {text: "{{.User}}"}}]
//	  - when: {last: tool, after: "notes__*"}            # a result of a notes__ tool arrived
//	    say: "Done: {{.Result}}"
//
// A call names an offered tool (or a glob resolved to the first offered match); a rule whose
// call matches no offered tool does not apply, unless the call says force: true (to test that
// the harness refuses what it did not offer). Strings in arguments and say are Go templates
// over [Data]. The server counts and keeps the requests it got (GET /debug/requests).
package script
