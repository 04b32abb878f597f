# ScratchRun session wrapper for bash, run as
#   bash -c WRAPPER FILE STATE NAME...
# for each call of a session (kernel.BashCommand). There is no long-lived
# shell: files and processes persist anyway, and this keeps the rest a user
# expects of "the same shell": exported variables and the working
# directory. It restores both from STATE (the last call's), applies the
# request's own variables (NAME...: they win over the saved ones), runs
# FILE in this shell (so its cd and export act here) with $0 = FILE and no
# positional parameters, as `bash FILE` would, and saves both on EXIT, also
# when FILE calls exit or set -e ends it. Nothing is saved when FILE ends
# by exec, is killed, or replaces the EXIT trap. Unset persists too: the
# saved set replaces what the environment brought.
__sr_state=$1
shift
__sr_request=
for __sr_n in "$@"; do
  [[ -v $__sr_n ]] && __sr_request+=$(builtin declare -p -- "$__sr_n")$'\n'
done
builtin set --

# Variables each shell sets for itself: never saved, never cleared.
__sr_own() {
  case $1 in PWD | OLDPWD | SHLVL | _) return 0 ;; esac
  return 1
}

if [[ -r $__sr_state/env ]]; then
  for __sr_n in $(builtin compgen -e); do
    __sr_own "$__sr_n" || builtin unset -v -- "$__sr_n" 2>/dev/null
  done
  builtin . "$__sr_state/env"
fi
builtin eval "$__sr_request"
if [[ -r $__sr_state/cwd ]]; then
  builtin cd -- "$(<"$__sr_state/cwd")" 2>/dev/null
fi

__sr_save() {
  builtin local - IFS=$' \t\n' n d f
  builtin set +euf
  [[ -d $1 ]] || mkdir -p -- "$1" || return
  {
    for n in $(builtin compgen -e); do
      __sr_own "$n" && continue
      d=$(builtin declare -p -- "$n" 2>/dev/null) || continue
      f=${d#declare -}
      f=${f%% *}
      # A readonly variable could not be restored over the next call's
      # environment; it is left to the environment.
      [[ $f == *r* ]] && continue
      builtin printf '%s\n' "$d"
    done
  } >"$1/env.new" && mv -f -- "$1/env.new" "$1/env"
  builtin printf '%s' "$PWD" >"$1/cwd"
}

__sr_exit() {
  __sr_rc=$?
  __sr_save "$1"
  builtin exit "$__sr_rc"
}

builtin trap "__sr_exit $(builtin printf %q "$__sr_state")" EXIT
__sr_file=$0
[[ $__sr_file == */* ]] || __sr_file=./$__sr_file
builtin unset -v __sr_state __sr_request __sr_n
builtin . "$__sr_file"
