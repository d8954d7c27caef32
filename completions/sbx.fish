# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_sbx_global_optspecs
    string join \n h/help V/version
end

function __fish_sbx_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_sbx_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_sbx_using_subcommand
    set -l cmd (__fish_sbx_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c sbx -n "__fish_sbx_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_needs_command" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "run" -d 'Run a command inside the sandbox (argv as given, no shell)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "profile" -d 'Print exactly what `sbx run` would execute: the bubblewrap argv or the Seatbelt profile'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "check" -d 'Diagnose the backend and print the effective policy'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "completions" -d 'Print a completion script for a shell'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "man" -d 'Print the man page (roff), sbx.toml(5) with --section 5, or the config schema with --schema'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__inner" -d 'Internal: the second stage, run by bubblewrap inside the sandbox as PID 1'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__reduced" -d 'Reduced mode\'s stage: apply Landlock, no_new_privs and seccomp to this process, then exec the command'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__guard" -d 'Internal: the guardian of a run, which makes its checks if sbx is killed'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__keep" -d 'Internal: reduced mode\'s keeper, the stage\'s parent, which ends every process the command leaves, also when sbx is killed'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__filter" -d 'Internal: add the Unix-socket filter, then exec the command'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__watch" -d 'Internal: the watcher of one project\'s `.env` files (see `envscan::watch`)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__connect" -d 'Internal: an ssh ProxyCommand that tunnels through the allowlist proxy'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__socket-probe" -d 'Internal: whether a socket stays in its directory under the macOS profile (see `run/socket_probe.rs`)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "__probe" -d 'Internal: what `sbx check` runs inside a sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand run" -l config -d 'Read this configuration file (trusted like the user file) [env: SBX_CONFIG]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand run" -l network -d 'Network mode' -r -f -a "deny\t''
allow\t''
allowlist\t''"
complete -c sbx -n "__fish_sbx_using_subcommand run" -l allow-domain -d 'Allow this host in allowlist mode: HOST, HOST:PORT or *.DOMAIN (repeatable; implies --network allowlist unless --network is given)' -r
complete -c sbx -n "__fish_sbx_using_subcommand run" -l writable -d 'Also make PATH writable (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand run" -l unix-sockets -d 'Unix sockets: own (default: only those made inside the sandbox are reachable), deny (none), or allow, which reaches the host\'s sockets too (ssh-agent, D-Bus, docker.sock)' -r -f -a "deny\t''
own\t''
allow\t''"
complete -c sbx -n "__fish_sbx_using_subcommand run" -l require -d 'Refuse to run (exit 125) when the full sandbox cannot be enforced; `--require=reduced` accepts Linux\'s reduced mode too' -r -f -a "full\t''
reduced\t''"
complete -c sbx -n "__fish_sbx_using_subcommand run" -l backend -d 'Which Linux sandbox runs: auto (bubblewrap, else reduced mode), bwrap, or reduced (Landlock and seccomp)' -r -f -a "auto\t''
bwrap\t''
reduced\t''"
complete -c sbx -n "__fish_sbx_using_subcommand run" -l project -d 'Use DIR as the project root instead of the repository around the working directory' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand run" -l max-processes -d 'At most N processes in the sandbox (default 4096)' -r
complete -c sbx -n "__fish_sbx_using_subcommand run" -l max-open-files -d 'At most N open files per process' -r
complete -c sbx -n "__fish_sbx_using_subcommand run" -l max-file-size -d 'No file written larger than SIZE (bytes, or with K, M, G, T)' -r
complete -c sbx -n "__fish_sbx_using_subcommand run" -l max-memory -d 'At most SIZE of memory for all the command\'s processes (a cgroup of the run\'s own, where the machine allows one; said where it does not)' -r
complete -c sbx -n "__fish_sbx_using_subcommand run" -l cpu-time -d 'At most SECS seconds of CPU time per process' -r
complete -c sbx -n "__fish_sbx_using_subcommand run" -l read-only -d 'No writes at all; reads limited to the project and system paths'
complete -c sbx -n "__fish_sbx_using_subcommand run" -l unsandboxed -d 'Run this one command without the sandbox, after an interactive yes on the terminal'
complete -c sbx -n "__fish_sbx_using_subcommand run" -s q -l quiet -d 'Do not print the banner (warnings are still printed)'
complete -c sbx -n "__fish_sbx_using_subcommand run" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l config -d 'Read this configuration file (trusted like the user file) [env: SBX_CONFIG]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l network -d 'Network mode' -r -f -a "deny\t''
allow\t''
allowlist\t''"
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l allow-domain -d 'Allow this host in allowlist mode: HOST, HOST:PORT or *.DOMAIN (repeatable; implies --network allowlist unless --network is given)' -r
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l writable -d 'Also make PATH writable (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l unix-sockets -d 'Unix sockets: own (default: only those made inside the sandbox are reachable), deny (none), or allow, which reaches the host\'s sockets too (ssh-agent, D-Bus, docker.sock)' -r -f -a "deny\t''
own\t''
allow\t''"
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l require -d 'Refuse to run (exit 125) when the full sandbox cannot be enforced; `--require=reduced` accepts Linux\'s reduced mode too' -r -f -a "full\t''
reduced\t''"
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l backend -d 'Which Linux sandbox runs: auto (bubblewrap, else reduced mode), bwrap, or reduced (Landlock and seccomp)' -r -f -a "auto\t''
bwrap\t''
reduced\t''"
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l project -d 'Use DIR as the project root instead of the repository around the working directory' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l max-processes -d 'At most N processes in the sandbox (default 4096)' -r
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l max-open-files -d 'At most N open files per process' -r
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l max-file-size -d 'No file written larger than SIZE (bytes, or with K, M, G, T)' -r
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l max-memory -d 'At most SIZE of memory for all the command\'s processes (a cgroup of the run\'s own, where the machine allows one; said where it does not)' -r
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l cpu-time -d 'At most SECS seconds of CPU time per process' -r
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l platform -d 'The platform to render for (default: this host)' -r -f -a "linux\t''
macos\t''"
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l format -d 'Output format' -r -f -a "text\t''
json\t''"
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l home -d 'Pretend the home directory is DIR, the user database\'s included (for reproducible snapshots)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l read-only -d 'No writes at all; reads limited to the project and system paths'
complete -c sbx -n "__fish_sbx_using_subcommand profile" -l unsandboxed -d 'Run this one command without the sandbox, after an interactive yes on the terminal'
complete -c sbx -n "__fish_sbx_using_subcommand profile" -s q -l quiet -d 'Do not print the banner (warnings are still printed)'
complete -c sbx -n "__fish_sbx_using_subcommand profile" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand check" -l config -d 'Read this configuration file (trusted like the user file) [env: SBX_CONFIG]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand check" -l network -d 'Network mode' -r -f -a "deny\t''
allow\t''
allowlist\t''"
complete -c sbx -n "__fish_sbx_using_subcommand check" -l allow-domain -d 'Allow this host in allowlist mode: HOST, HOST:PORT or *.DOMAIN (repeatable; implies --network allowlist unless --network is given)' -r
complete -c sbx -n "__fish_sbx_using_subcommand check" -l writable -d 'Also make PATH writable (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand check" -l unix-sockets -d 'Unix sockets: own (default: only those made inside the sandbox are reachable), deny (none), or allow, which reaches the host\'s sockets too (ssh-agent, D-Bus, docker.sock)' -r -f -a "deny\t''
own\t''
allow\t''"
complete -c sbx -n "__fish_sbx_using_subcommand check" -l require -d 'Refuse to run (exit 125) when the full sandbox cannot be enforced; `--require=reduced` accepts Linux\'s reduced mode too' -r -f -a "full\t''
reduced\t''"
complete -c sbx -n "__fish_sbx_using_subcommand check" -l backend -d 'Which Linux sandbox runs: auto (bubblewrap, else reduced mode), bwrap, or reduced (Landlock and seccomp)' -r -f -a "auto\t''
bwrap\t''
reduced\t''"
complete -c sbx -n "__fish_sbx_using_subcommand check" -l project -d 'Use DIR as the project root instead of the repository around the working directory' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand check" -l max-processes -d 'At most N processes in the sandbox (default 4096)' -r
complete -c sbx -n "__fish_sbx_using_subcommand check" -l max-open-files -d 'At most N open files per process' -r
complete -c sbx -n "__fish_sbx_using_subcommand check" -l max-file-size -d 'No file written larger than SIZE (bytes, or with K, M, G, T)' -r
complete -c sbx -n "__fish_sbx_using_subcommand check" -l max-memory -d 'At most SIZE of memory for all the command\'s processes (a cgroup of the run\'s own, where the machine allows one; said where it does not)' -r
complete -c sbx -n "__fish_sbx_using_subcommand check" -l cpu-time -d 'At most SECS seconds of CPU time per process' -r
complete -c sbx -n "__fish_sbx_using_subcommand check" -l format -d 'Output format' -r -f -a "text\t''
json\t''"
complete -c sbx -n "__fish_sbx_using_subcommand check" -l read-only -d 'No writes at all; reads limited to the project and system paths'
complete -c sbx -n "__fish_sbx_using_subcommand check" -l unsandboxed -d 'Run this one command without the sandbox, after an interactive yes on the terminal'
complete -c sbx -n "__fish_sbx_using_subcommand check" -s q -l quiet -d 'Do not print the banner (warnings are still printed)'
complete -c sbx -n "__fish_sbx_using_subcommand check" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand man" -l section -d 'The manual section: 1 for sbx(1), 5 for the configuration file, sbx.toml(5)' -r -f -a "1\t''
5\t''"
complete -c sbx -n "__fish_sbx_using_subcommand man" -l schema -d 'Print the JSON Schema (draft 2020-12) of the configuration file instead'
complete -c sbx -n "__fish_sbx_using_subcommand man" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l unix-sockets -d 'The command\'s Unix sockets: none (deny), its own, or the host\'s too' -r -f -a "deny\t''
own\t''
allow\t''"
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l socket-dir -d 'With `--unix-sockets own`: the only directory where the command may make sockets (a tmpfs of its own)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l symlinks-in -d 'With `--unix-sockets own`: a directory beneath which the command may make symbolic links, besides the socket directory (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l ready-fd -d 'A pipe on which to report that the sandbox is up' -r
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l proxy-socket -d 'Relay 127.0.0.1:3128 inside the sandbox to this proxy socket' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l limit -d 'A resource limit for the command (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l network-hint -d 'Say, when the command fails, whether it tried the network this sandbox denies (`deny`) or reaches only through the proxy (`allowlist`)' -r
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l config-copies -d 'The run\'s directory of private git config copies (`N`, `N.link`)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l private-config -d 'A git config to mount the link `N.link` over, N counting from 0 in the order given (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l pin -d 'A directory to bind onto itself, so that it cannot be renamed (repeatable; with the config copies, whose set-up has the capability to mount)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l pin-link -d 'A symbolic link to mount onto itself after the pins, so that it cannot be removed or replaced (repeatable; with the config copies)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l mask -d 'A file to mask with a read-only bind of `--mask-with`, after the pins and the copies (repeatable; with the config copies, whose set-up has the capability to mount). In a writable root: gone now, it was moved, and the set-up is refused' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l mask-if-present -d 'The same for a file outside every writable root, skipped when the sandbox does not show it (a path under its own `/dev` or `/proc`)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -l mask-with -d 'The empty file every `--mask` shows (sbx\'s placeholder)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __inner" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l read -d 'Readable, with everything beneath it but the hidden paths (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l write -d 'Writable, with everything beneath it (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l device -d 'A device node or directory programs write to (skipped when missing)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l hide -d 'A real path left unreadable (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l network -d '`deny`, `allow`, or `proxy:PORT` (TCP to that port only)' -r
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l ready-fd -d 'A pipe on which to report that the rules are in force' -r
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l limit -d 'A resource limit for the command (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l writes-unrestricted -d 'Rule reads only (`filesystem = false`)'
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -l allow-unix-sockets -d 'Let the command create Unix sockets'
complete -c sbx -n "__fish_sbx_using_subcommand __reduced" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __guard" -l cache -d 'sbx\'s cache directory (the run\'s note is in its `pending`)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __guard" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __keep" -l parent-fd -d 'The read end of a pipe whose writer is sbx' -r
complete -c sbx -n "__fish_sbx_using_subcommand __keep" -l cache -d 'sbx\'s cache directory (the run\'s note is in its `pending`)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __keep" -l limit -d 'A resource limit the stage sets (repeatable), to say which one stopped the command' -r
complete -c sbx -n "__fish_sbx_using_subcommand __keep" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __filter" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __watch" -l cache -d 'sbx\'s cache directory (the socket is in its `watch`)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand __watch" -l max-watches -d 'The most directories watched (a test\'s stand-in for the kernel\'s limit)' -r
complete -c sbx -n "__fish_sbx_using_subcommand __watch" -l after -d 'Walk only once this process (`PID-START`, the sbx run that started the watcher) has ended, or a second has passed' -r
complete -c sbx -n "__fish_sbx_using_subcommand __watch" -l detach -d 'Start the watcher and return at once'
complete -c sbx -n "__fish_sbx_using_subcommand __watch" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __connect" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __socket-probe" -s h -l help -d 'Print help'
complete -c sbx -n "__fish_sbx_using_subcommand __probe" -s h -l help -d 'Print help'
