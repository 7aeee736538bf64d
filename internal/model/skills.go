package model

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
)

// Skill is one Agent Skill: a directory <name>/SKILL.md with YAML frontmatter. Only Name and
// Description are in the first request; activate_skill puts Body into the conversation.
type Skill struct {
	// Name is the frontmatter's name, equal to the skill's directory name: lowercase
	// letters, digits and single hyphens, at most 64.
	Name string
	// Description is the frontmatter's description, offered in the system message.
	Description string
	// Body is the text after the frontmatter, which activate_skill puts into the
	// conversation.
	Body string
}

// LoadSkills reads every <dir>/SKILL.md of fsys (the skill's skills_dir, opened by the
// composition root). A malformed one is skipped and reported in warnings, each naming the
// file; the rest load, sorted by name. A skill's text suggests; it never makes a tool visible.
func LoadSkills(fsys fs.FS) (skills []Skill, warnings []error, err error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, nil, fmt.Errorf("read skills dir: %w", err)
	}
	for _, e := range entries { // ReadDir sorts by name
		if !e.IsDir() {
			continue
		}
		file := path.Join(e.Name(), "SKILL.md")
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			warnings = append(warnings, fmt.Errorf("skill %s: %w", file, err))
			continue
		}
		s, err := parseSkill(data)
		if err == nil && s.Name != e.Name() {
			err = fmt.Errorf("name %q is not the directory's name %q", s.Name, e.Name())
		}
		if err != nil {
			warnings = append(warnings, fmt.Errorf("skill %s: %w", file, err))
			continue
		}
		skills = append(skills, s)
	}
	return skills, warnings, nil
}

// parseSkill splits a SKILL.md into its frontmatter and body and checks the frontmatter.
func parseSkill(data []byte) (Skill, error) {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return Skill{}, fmt.Errorf("no YAML frontmatter (the file must start with ---)")
	}
	front, body, ok := bytes.Cut(rest, []byte("\n---\n"))
	if !ok {
		if front, ok = bytes.CutSuffix(rest, []byte("\n---")); !ok {
			return Skill{}, fmt.Errorf("the frontmatter has no closing ---")
		}
	}
	var fm struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.Unmarshal(front, &fm); err != nil {
		return Skill{}, fmt.Errorf("frontmatter: %w", err)
	}
	switch {
	case fm.Name == "":
		return Skill{}, fmt.Errorf("name is required")
	case len(fm.Name) > 64 || !skillName.MatchString(fm.Name):
		return Skill{}, fmt.Errorf("name %q must be lowercase letters, digits and single hyphens, at most 64", fm.Name)
	case strings.TrimSpace(fm.Description) == "":
		return Skill{}, fmt.Errorf("description is required")
	case len(fm.Description) > 1024:
		return Skill{}, fmt.Errorf("description is longer than 1024 characters")
	}
	return Skill{Name: fm.Name, Description: strings.TrimSpace(fm.Description), Body: strings.TrimSpace(string(body))}, nil
}
