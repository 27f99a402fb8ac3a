package ghfake

import (
	"slices"
	"strings"
)

// InputEnvPrefix starts the environment variables from which config.sh
// takes an option that its command line lacks, as the real one does:
// ACTIONS_RUNNER_INPUT_TOKEN for --token, ACTIONS_RUNNER_INPUT_URL for
// --url, ACTIONS_RUNNER_INPUT_NAME, ACTIONS_RUNNER_INPUT_LABELS,
// ACTIONS_RUNNER_INPUT_WORK and ACTIONS_RUNNER_INPUT_RUNNERGROUP likewise;
// ACTIONS_RUNNER_INPUT_UNATTENDED, _REPLACE, _EPHEMERAL and
// _DISABLEUPDATE set to "true" stand for those switches. The name after
// the prefix is case-insensitive; a value is trimmed, and an empty one
// is ignored.
const InputEnvPrefix = "ACTIONS_RUNNER_INPUT_"

// configArgs are config.sh's options.
type configArgs struct {
	commands                       []string // the words before the first --option
	url, token, name, labels, work string
	unattended, replace, ephemeral bool
	unknown                        []string // what config.sh does not know: it warns
}

// Options the fake config.sh takes, lower case, besides the command
// "remove", which it refuses. The real one takes a few more (--pat,
// --runasservice, --no-default-labels...), which the fake warns about as
// about unknown ones, and ignores.
var (
	configCommands = []string{"configure", "remove", "run", "warmup"}
	configValues   = []string{"url", "token", "name", "labels", "work", "runnergroup"}
	configSwitches = []string{"unattended", "replace", "ephemeral", "disableupdate"}
)

// parsedArgs is a command line as the real runner's parser reads it.
type parsedArgs struct {
	commands []string
	flags    []string          // as given, each once (whatever its case), in order
	values   map[string]string // by lower-case name
	order    []string          // values' names as given, in order
}

// parseArgs reads a command line as actions/runner's parser does: words
// before the first --option are commands; --NAME followed by a word that
// does not start with "-" sets NAME to it (the first time only), and is a
// switch otherwise; anything else is ignored.
func parseArgs(args []string) parsedArgs {
	p := parsedArgs{values: map[string]string{}}
	scope, hasArgs := "", false
	for _, arg := range args {
		hasArgs = hasArgs || strings.HasPrefix(arg, "--")
		switch {
		case arg == "/?":
			p.addFlag("help")
		case !hasArgs:
			p.commands = append(p.commands, strings.TrimSpace(arg))
		case strings.HasPrefix(arg, "--") && len(arg) > 2:
			if scope != "" { // two --options in a row: the first is a switch
				p.addFlag(scope)
			}
			scope = strings.TrimSpace(arg[2:])
		case !strings.HasPrefix(arg, "-") && scope != "":
			if _, dup := p.values[key(scope)]; !dup {
				p.values[key(scope)] = arg
				p.order = append(p.order, scope)
				scope = ""
			}
		}
	}
	if scope != "" {
		p.addFlag(scope)
	}
	return p
}

func (p *parsedArgs) addFlag(name string) {
	if !containsFold(p.flags, name) {
		p.flags = append(p.flags, name)
	}
}

// containsFold reports whether list holds s, whatever its case.
func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(e string) bool { return strings.EqualFold(e, s) })
}

// inputEnv returns the options set in environ (KEY=VALUE entries) with
// InputEnvPrefix, by lower-case name.
func inputEnv(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if len(k) <= len(InputEnvPrefix) || !strings.EqualFold(k[:len(InputEnvPrefix)], InputEnvPrefix) {
			continue
		}
		if v = strings.TrimSpace(v); v != "" {
			out[key(k[len(InputEnvPrefix):])] = v
		}
	}
	return out
}

// parseConfigArgs reads config.sh's command line, and for what it lacks
// the environment environ, as the real config.sh does.
func parseConfigArgs(args, environ []string) configArgs {
	p, env := parseArgs(args), inputEnv(environ)
	value := func(name, def string) string {
		if v, ok := p.values[name]; ok { // given, even empty: the environment is not looked at
			return v
		}
		if v, ok := env[name]; ok {
			return v
		}
		return def
	}
	on := func(name string) bool {
		return containsFold(p.flags, name) || strings.EqualFold(env[name], "true")
	}
	a := configArgs{
		commands: p.commands, url: value("url", ""), token: value("token", ""), name: value("name", ""),
		labels: value("labels", ""), work: value("work", "_work"),
		unattended: on("unattended"), replace: on("replace"), ephemeral: on("ephemeral"),
	}
	for _, names := range []struct{ given, known []string }{
		{p.commands, configCommands}, {p.flags, configSwitches}, {p.order, configValues},
	} {
		for _, n := range names.given {
			if !containsFold(names.known, n) {
				a.unknown = append(a.unknown, n)
			}
		}
	}
	return a
}

// removing reports whether config.sh was asked to remove the runner.
func (a configArgs) removing() bool {
	return len(a.commands) > 0 && strings.EqualFold(a.commands[0], "remove")
}
