package model

import "encoding/json"

// Option configures a [Loop].
type Option interface{ apply(*Loop) }

type optionFunc func(*Loop)

func (f optionFunc) apply(l *Loop) { f(l) }

// WithSkills offers Agent Skills by name and description, loaded by activate_skill. By
// default there are none and activate_skill is not offered.
func WithSkills(s []Skill) Option { return optionFunc(func(l *Loop) { l.skills = s }) }

// WithOutputSchema makes the skill finish through submit_result, whose parameters are schema.
// By default the model's text answer is the result.
func WithOutputSchema(schema json.RawMessage) Option {
	return optionFunc(func(l *Loop) { l.outputRaw = schema })
}

// WithProgress reports short status lines (the tool called, why one was refused), never the
// model's text. By default nothing is reported.
func WithProgress(f func(string)) Option { return optionFunc(func(l *Loop) { l.progress = f }) }

// WithObservationLimit bounds a rendered observation; the default is
// [DefaultObservationLimit] bytes.
func WithObservationLimit(n int) Option { return optionFunc(func(l *Loop) { l.obsLimit = n }) }
