package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The generators below write one shell's script from the completion
// tree. The words they write (commands, flags, values) are plain
// (TestCompletionWordsArePlain), so only help texts need quoting.

// pathCases is the case arms that extend the command path by one word:
// "scratchrun images"|"scratchrun keys"|... for every non-root node.
func pathCases(nodes []completionNode) string {
	var arms []string
	for _, n := range nodes[1:] {
		arms = append(arms, `"`+n.key()+`"`)
	}
	return strings.Join(arms, "|")
}

// valueFlags lists, for a node, its flags that take a value with known
// values (by flag) and those that take any value.
func valueFlags(n completionNode) (known map[string][]string, free []string) {
	known = map[string][]string{}
	for _, f := range flagsOf(n.completion) {
		switch {
		case len(f.values) > 0:
			known[f.name] = f.values
		case f.value:
			free = append(free, f.name)
		}
	}
	return known, free
}

func dashed(flags []flagCompletion) []string {
	var out []string
	for _, f := range flagsOf(completion{flags: flags}) {
		out = append(out, "--"+f.name)
	}
	return out
}

// bashCompletion is the bash script: _scratchrun, registered with
// -o default so that a word it has nothing for completes as a file.
func bashCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString(`# bash completion for scratchrun (scratchrun completion bash)
_scratchrun() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="" cmd="scratchrun" i=1 words="" flags=""
  (( COMP_CWORD > 0 )) && prev="${COMP_WORDS[COMP_CWORD-1]}"
  # --flag=value: bash splits at = (COMP_WORDBREAKS).
  if [[ $cur == "=" ]]; then cur=""; elif [[ $prev == "=" ]] && (( COMP_CWORD > 1 )); then prev="${COMP_WORDS[COMP_CWORD-2]}"; fi
  for (( ; i < COMP_CWORD; i++ )); do
    case "$cmd ${COMP_WORDS[i]}" in
      ` + pathCases(nodes) + `) cmd="$cmd ${COMP_WORDS[i]}" ;;
    esac
  done
  prev="${prev/#--/-}"
  case "$cmd $prev" in
`)
	writeCases(&b, nodes, shellCases{
		known: func(key, values string) string {
			return fmt.Sprintf("%q) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;", key, values)
		},
		free: func(key string) string { return fmt.Sprintf("%q) return ;;", key) },
		node: func(key, words, flags string) string {
			return fmt.Sprintf("%q) words=%q; flags=%q ;;", key, words, flags)
		},
	})
	b.WriteString(`  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}
complete -o default -F _scratchrun scratchrun
`)
	return b.String()
}

// zshCompletion is the zsh script: an autoloadable _scratchrun (#compdef)
// that also works sourced.
func zshCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString(`#compdef scratchrun
# zsh completion for scratchrun (scratchrun completion zsh)
_scratchrun() {
  local cur="${words[CURRENT]}" prev="${words[CURRENT-1]}" cmd="scratchrun" i
  local -a subs flags
  for (( i = 2; i < CURRENT; i++ )); do
    case "$cmd ${words[i]}" in
      ` + pathCases(nodes) + `) cmd="$cmd ${words[i]}" ;;
    esac
  done
  prev="${prev/#--/-}"
  case "$cmd $prev" in
`)
	writeCases(&b, nodes, shellCases{
		known: func(key, values string) string { return fmt.Sprintf("%q) compadd -- %s; return ;;", key, values) },
		free:  func(key string) string { return fmt.Sprintf("%q) _files; return ;;", key) },
		node: func(key, words, flags string) string {
			return fmt.Sprintf("%q) subs=(%s); flags=(%s) ;;", key, words, flags)
		},
	})
	b.WriteString(`  esac
  if [[ $cur == -* ]]; then
    compadd -- "${flags[@]}"
  elif (( ${#subs} )); then
    compadd -- "${subs[@]}"
  else
    _files
  fi
}
if [[ "${funcstack[1]}" == _scratchrun ]]; then
  _scratchrun "$@"
else
  compdef _scratchrun scratchrun
fi
`)
	return b.String()
}

// fishCompletion is the fish script: one complete line per word, under a
// condition that the command path is the node's.
func fishCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString(`# fish completion for scratchrun (scratchrun completion fish)
function __scratchrun_at
    set -l cmd scratchrun
    for w in (commandline -opc)[2..-1]
        switch "$cmd $w"
            case ` + strings.ReplaceAll(strings.ReplaceAll(pathCases(nodes), `"`, `'`), "|", " ") + `
                set cmd "$cmd $w"
        end
    end
    test "$cmd" = "$argv[1]"
end
complete -c scratchrun -e
`)
	for _, n := range nodes {
		cond := fishQuote("__scratchrun_at " + fishQuote(n.key()))
		for _, s := range n.subs {
			fmt.Fprintf(&b, "complete -c scratchrun -f -n %s -a %s -d %s\n", cond, s.name, fishQuote(s.summary))
		}
		for _, a := range n.args {
			fmt.Fprintf(&b, "complete -c scratchrun -f -n %s -a %s\n", cond, a)
		}
		for _, f := range flagsOf(n.completion) {
			opts := ""
			switch {
			case len(f.values) > 0:
				opts = " -x -a " + fishQuote(strings.Join(f.values, " "))
			case f.value:
				opts = " -r"
			}
			fmt.Fprintf(&b, "complete -c scratchrun -n %s -l %s%s -d %s\n", cond, f.name, opts, fishQuote(f.help))
		}
	}
	return b.String()
}

// fishQuote quotes s for fish: in single quotes only \ and ' are special.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func sortedKeys(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }

// shellCases are how one shell spells the arms of the two case statements
// bash and zsh share: a flag's known values, a flag with a free value (a
// file name), and a command path's words and flags.
type shellCases struct {
	known func(key, values string) string
	free  func(key string) string
	node  func(key, words, flags string) string
}

// writeCases writes the arms of the flag-value case (its esac included)
// and those of the command-path case that follows it.
func writeCases(b *strings.Builder, nodes []completionNode, c shellCases) {
	for _, n := range nodes {
		known, free := valueFlags(n)
		for _, name := range sortedKeys(known) {
			fmt.Fprintf(b, "    %s\n", c.known(n.key()+" -"+name, strings.Join(known[name], " ")))
		}
		for _, name := range free {
			fmt.Fprintf(b, "    %s\n", c.free(n.key()+" -"+name))
		}
	}
	b.WriteString("  esac\n  case \"$cmd\" in\n")
	for _, n := range nodes {
		words := strings.Join(append(n.subNames(), n.args...), " ")
		fmt.Fprintf(b, "    %s\n", c.node(n.key(), words, strings.Join(dashed(flagsOf(n.completion)), " ")))
	}
}
