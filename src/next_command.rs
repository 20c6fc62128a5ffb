//! The plan's first and last lines (SPEC §4, issue 19 item 6): the plan opens with the exact
//! command that applies it (`eas up --yes` with every flag the user gave: `--pins`,
//! `--profile`, the repository and node flags, the global ones) and closes with the next command
//! to run. Built from the command line as typed, so no flag is lost in a reconstruction; the
//! dry run's own flags are dropped. Pure.

use crate::installer::command::shell_line;
use crate::plan::Plan;
use crate::settings::Env;

/// Flags that only a dry run takes, with whether each takes a value.
const DRY_RUN_ONLY: &[(&str, bool)] =
    &[("--dry-run", false), ("--explain", false), ("--fail-on-blockers", false), ("--out", true), ("--output", true)];

/// Settings `eas up` reads from the environment when their flag is not given, with the flag: the
/// commands eas prints carry them as flags, so a line pasted into another shell runs the same.
/// Secrets are never among them (a line that needs one says to set it: [`with_secrets`]). The
/// global ones are [`GLOBAL_INPUTS`]'. The host's own variables (`KUBECONFIG`, `XDG_STATE_HOME`,
/// `DOCKER_HOST`, the proxy's) are not eas's inputs alone and stay the shell's.
const FROM_ENV: &[(&str, &str)] = &[("EAS_BASE_IMAGE", "--base-image"), ("EAS_PINS", "--pins")];

/// The global flags that are a run's inputs (the config file, the cluster, the state, the CA
/// bundle), each with the variable that stands for it when it is not typed: `EAS_CONFIG` too,
/// since the config file is not remembered (only what it resolved to). The presentation flags
/// (`-v`, `--progress`...) are not inputs.
const GLOBAL_INPUTS: &[(&str, Option<&str>)] = &[
    ("--config", Some(crate::settings::file::ENV_VAR)),
    ("--kubeconfig", None),
    ("--context", None),
    ("--state-dir", None),
    ("--ca-bundle", Some("EAS_CA_BUNDLE")),
];

/// The global inputs every command eas prints for the next run repeats: each as typed on this
/// command line (before the command or after it), then the variables that stand for one not
/// typed, as flags. The one builder of the global part of every such command, `eas up`'s
/// ([`up_words`]) and `eas down`'s, `verify`'s and `doctor`'s (`state::resume::Invocation`), so
/// one `next:` line never names the cluster two ways. A config file found as `./eas.yaml` is not
/// named: the next command, in the same directory, finds it.
pub fn global_words(env: &Env) -> Vec<String> {
    let (mut words, _) = split_globals(env.args.get(1..).unwrap_or_default());
    for (flag, var) in GLOBAL_INPUTS {
        if let Some(value) = var.and_then(|v| env.nonempty(v)).filter(|_| !given(&env.args, flag)) {
            words.extend([flag.to_string(), value]);
        }
    }
    words
}

/// `args` split into the global inputs among them (each with its value) and the rest.
fn split_globals(args: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut globals, mut rest) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        if !GLOBAL_INPUTS.iter().any(|(f, _)| *f == name) {
            rest.push(a.clone());
            continue;
        }
        globals.push(a.clone());
        if !a.contains('=') {
            globals.extend(it.next().cloned());
        }
    }
    (globals, rest)
}

/// Whether `flag` is typed in `args` (`--flag value` or `--flag=value`).
fn given(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
}

/// `eas up --yes` with the user's flags, from the command line as typed (`env.args`, `args[0]` the
/// program) and the settings taken from the environment; `None` unless it is an `eas up` command
/// line.
pub fn apply_command(env: &Env) -> Option<String> {
    up_words(env).map(|w| shell_line(&w))
}

/// The flags a saved plan carries in its `selection` (and `--plan` itself): refused beside
/// `--plan`, so a command that applies a saved plan repeats none of them (issue 32).
const SELECTION: &[(&str, bool)] = &[
    ("--layer", true),
    ("--profile", true),
    ("--ref", true),
    ("--model", true),
    ("--repick", false),
    ("--pins", true),
    ("--fit", true),
    ("--env", true),
    ("--plan", true),
];

/// [`apply_command`] as words: `eas`, the global inputs ([`global_words`]), the other flags typed
/// before `up`, `up`, `--yes`, the rest.
pub fn up_words(env: &Env) -> Option<Vec<String>> {
    words(env, None)
}

/// `eas up --yes --plan DIR` with the user's other flags: the command that applies, exactly, the
/// plan a dry run saved in DIR (`--out DIR`); the selection is the saved plan's.
pub fn apply_saved(env: &Env, dir: &str) -> Option<String> {
    words(env, Some(dir)).map(|w| shell_line(&w))
}

/// The words of `eas up --yes` from the command line as typed, the dry run's own flags dropped;
/// applying the plan saved in `saved`, the selection flags too, and `--plan DIR` added.
fn words(env: &Env, saved: Option<&str>) -> Option<Vec<String>> {
    let args = &env.args;
    let up = args.iter().position(|a| a == "up")?;
    let mut words = vec!["eas".to_string()];
    words.extend(global_words(env));
    words.extend(split_globals(&args[1..up]).1);
    words.extend(["up".to_string(), "--yes".to_string()]);
    let dropped = DRY_RUN_ONLY.iter().chain(SELECTION.iter().filter(|_| saved.is_some()));
    let dropped: Vec<&(&str, bool)> = dropped.collect();
    let after = split_globals(&args[up + 1..]).1;
    let mut rest = after.iter();
    while let Some(a) = rest.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, _)) if n.starts_with("--") => (n, true),
            _ => (a.as_str(), false),
        };
        match dropped.iter().find(|(f, _)| *f == name) {
            Some((_, takes_value)) => {
                if *takes_value && !inline {
                    rest.next();
                }
            }
            None if a == "--yes" => {}
            None => words.push(a.clone()),
        }
    }
    let given = |flag: &str| given(args, flag);
    if let Some(dir) = saved {
        words.extend(["--plan".to_string(), dir.to_string()]);
    }
    // A saved plan's run takes its pins from the plan: `EAS_PINS` as `--pins` would be refused.
    let applying = saved.is_some() || given("--plan");
    for (var, flag) in FROM_ENV {
        if applying && SELECTION.iter().any(|(f, _)| f == flag) {
            continue;
        }
        if let Some(value) = env.nonempty(var).filter(|_| !given(flag)) {
            words.extend([flag.to_string(), value]);
        }
    }
    Some(words)
}

/// `cmd` in backquotes, preceded by the secrets it needs from the environment, by name (never a
/// value: the line is printed and logged): `with HF_TOKEN set in the environment, `eas up …``.
pub fn with_secrets(cmd: &str, secrets: &[String]) -> String {
    match secrets {
        [] => format!("`{cmd}`"),
        [one] => format!("with {one} set in the environment, `{cmd}`"),
        [rest @ .., last] => format!("with {} and {last} set in the environment, `{cmd}`", rest.join(", ")),
    }
}

/// The secrets a run read from the environment, by name: each of `secret_vars` that is set, and
/// each proxy variable whose URL holds a password. A command printed for the next run names them,
/// since it needs them set again.
pub fn secrets_in(env: &Env, secret_vars: &[&str]) -> Vec<String> {
    let mut names: Vec<String> =
        secret_vars.iter().filter(|v| env.nonempty(v).is_some()).map(|v| v.to_string()).collect();
    for var in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        let password = env.nonempty(var).is_some_and(|url| {
            let authority = url.split_once("://").map_or(url.as_str(), |(_, r)| r).split(['/', '?', '#']).next();
            authority.and_then(|a| a.rsplit_once('@')).is_some_and(|(userinfo, _)| userinfo.contains(':'))
        });
        if password {
            names.push(format!("{var} (its password)"));
        }
    }
    names
}

/// The plan's first lines: the command that applies it, wrapped to `width` as a shell reads it
/// (` \` continuations), else (a plan not made from a command line: tests, a record) the layer
/// and environment.
pub fn header(plan: &Plan, width: usize) -> Vec<String> {
    match &plan.apply_command() {
        Some(cmd) => shell_wrap(cmd, "", width),
        None => vec![format!("eas up --layer {} --env {}", plan.layer(), plan.env())],
    }
}

/// The plan's closing lines: what to run next.
pub fn closing(plan: &Plan, width: usize) -> Vec<String> {
    let Some(cmd) = &plan.apply_command() else { return Vec::new() };
    let mut out = vec![String::new()];
    if !plan.blockers().is_empty() {
        out.push("next: remove the blockers above (each names its fix), then run:".to_string());
        out.extend(shell_wrap(cmd, "  ", width));
    } else {
        out.extend(shell_wrap(cmd, "next: ", width));
    }
    out
}

/// A shell command (as `shell_line` quotes it) in lines of at most `width` where it can be, each
/// but the last ending in ` \`; a flag stays with its value. Control characters are escaped.
pub fn shell_wrap(cmd: &str, first: &str, width: usize) -> Vec<String> {
    let cmd = crate::text::escape_controls(cmd);
    // Words, split at spaces outside single quotes.
    let mut words: Vec<String> = Vec::new();
    let (mut word, mut quoted) = (String::new(), false);
    for c in cmd.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                word.push(c);
            }
            ' ' if !quoted => words.push(std::mem::take(&mut word)),
            _ => word.push(c),
        }
    }
    words.push(word);
    // A flag and its value are one unit.
    let mut units: Vec<String> = Vec::new();
    for w in words.into_iter().filter(|w| !w.is_empty()) {
        match units.last_mut() {
            Some(last)
                if last.starts_with("--") && !last.contains(' ') && !last.contains('=') && !w.starts_with('-') =>
            {
                last.push(' ');
                last.push_str(&w);
            }
            _ => units.push(w),
        }
    }
    let width = width.max(40);
    let mut lines = vec![first.to_string()];
    let indent = format!("{}    ", " ".repeat(first.len()));
    // A flag with a value too long for a line of its own goes on two lines.
    let units = units.into_iter().flat_map(|u| match u.split_once(' ') {
        Some((flag, value)) if indent.len() + u.chars().count() + 2 > width && !flag.contains('\'') => {
            vec![flag.to_string(), value.to_string()]
        }
        _ => vec![u],
    });
    for u in units {
        let line = lines.last_mut().expect("one line");
        let blank = line.trim().is_empty() || line.as_str() == first;
        if !blank && line.chars().count() + 1 + u.chars().count() + 2 > width {
            line.push_str(" \\");
            lines.push(format!("{indent}{u}"));
        } else {
            if !blank {
                line.push(' ');
            }
            line.push_str(&u);
        }
    }
    lines
}

/// A command line written as one string, split into its words (the tests of the command lines
/// eas prints and of the ones it is given).
#[cfg(test)]
pub fn argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apply_command_keeps_the_users_flags_and_drops_the_dry_runs() {
        let cases = [
            (
                "/usr/bin/eas --context k3d-gpu up --dry-run --pins ./p.json --profile main --eas-repo /m/eas --output json",
                "eas --context k3d-gpu up --yes --pins ./p.json --profile main --eas-repo /m/eas",
            ),
            ("eas up --dry-run --out=plan --explain --fail-on-blockers --yes", "eas up --yes"),
            ("eas -v up --dry-run --nri-socket n=present --output=json", "eas -v up --yes --nri-socket n=present"),
        ];
        for (line, want) in cases {
            assert_eq!(apply_command(&typed(line, &[])).as_deref(), Some(want), "{line}");
        }
        // A value with a space stays one word, quoted for a shell.
        let mut env = typed("eas up --dry-run --containerd-config", &[]);
        env.args.push("node=a b.toml".into());
        assert_eq!(apply_command(&env).as_deref(), Some("eas up --yes --containerd-config 'node=a b.toml'"));
        assert_eq!(apply_command(&typed("eas down --dry-run", &[])), None);
    }

    /// Issue 32: the command that applies a saved plan repeats no selection flag (the plan
    /// carries them; beside `--plan` they are bad input), nor `EAS_PINS` as `--pins`; a run of a
    /// saved plan's own next line keeps its `--plan` and leaves `EAS_PINS` out too.
    #[test]
    fn a_saved_plan_is_applied_by_its_directory_without_the_selection_flags() {
        let vars = [("EAS_PINS", "/p/pins.json"), ("EAS_CA_BUNDLE", "/ca.pem")];
        let line = "eas --context k up --dry-run --out plan --layer inference --pins=p.json --model m \
                    --profile main --env k3d-gpu --fit f.json --eas-repo /m/eas --probe-nodes";
        let env = typed(line, &vars);
        assert_eq!(
            apply_saved(&env, "plan").as_deref(),
            Some("eas --context k --ca-bundle /ca.pem up --yes --eas-repo /m/eas --probe-nodes --plan plan")
        );
        let repicked = typed("eas up --dry-run --repick --out new", &vars);
        assert_eq!(apply_saved(&repicked, "new").as_deref(), Some("eas --ca-bundle /ca.pem up --yes --plan new"));
        let again = typed("eas up --dry-run --plan old --out new --ref 0123", &vars);
        assert_eq!(apply_saved(&again, "new").as_deref(), Some("eas --ca-bundle /ca.pem up --yes --plan new"));
        let applying = typed("eas up --yes --plan plan --eas-repo /m/eas", &vars);
        assert_eq!(
            apply_command(&applying).as_deref(),
            Some("eas --ca-bundle /ca.pem up --yes --plan plan --eas-repo /m/eas")
        );
        assert_eq!(apply_saved(&typed("eas down --dry-run", &[]), "plan"), None);
    }

    /// The command line `line` in the environment `vars`.
    fn typed(line: &str, vars: &[(&str, &str)]) -> Env {
        let mut env = Env::of(vars);
        env.args = argv(line);
        env
    }

    #[test]
    fn settings_taken_from_the_environment_are_carried_as_flags_unless_given_and_secrets_by_name_only() {
        let vars = [
            ("EAS_CA_BUNDLE", "/etc/proxy-ca.pem"),
            ("EAS_BASE_IMAGE", "ubuntu:24.04@sha256:ab"),
            ("EAS_PINS", ""),
            ("EAS_CONFIG", "site/eas.yaml"),
            ("HF_TOKEN", "hf_secretvalue"),
            ("HTTPS_PROXY", "http://u:pw@proxy:3128"),
            ("HTTP_PROXY", "http://proxy:3128"),
        ];
        let env = typed("eas --context k up --yes --base-image=b@sha256:cd --layer inference", &vars);
        assert_eq!(
            apply_command(&env).as_deref(),
            Some(
                "eas --context k --config site/eas.yaml --ca-bundle /etc/proxy-ca.pem up --yes --base-image=b@sha256:cd \
                 --layer inference"
            )
        );
        // A --config typed (before the command or after it) wins over EAS_CONFIG, and is not repeated.
        for line in ["eas --config=other.yaml up --dry-run", "eas up --dry-run --config other.yaml"] {
            let words = up_words(&typed(line, &vars)).unwrap();
            assert_eq!(words.iter().filter(|w| w.contains("eas.yaml")).count(), 0, "{words:?}");
            assert_eq!(words.iter().filter(|w| w.contains("other.yaml")).count(), 1, "{words:?}");
        }
        let secrets = secrets_in(&env, &["HF_TOKEN", "KEYCLOAK_ADMIN_PASSWORD"]);
        assert_eq!(secrets, ["HF_TOKEN", "HTTPS_PROXY (its password)"]);
        let line = with_secrets("eas up --yes", &secrets);
        assert_eq!(line, "with HF_TOKEN and HTTPS_PROXY (its password) set in the environment, `eas up --yes`");
        assert!(!line.contains("hf_secretvalue") && !line.contains("pw"), "{line}");
        assert_eq!(with_secrets("eas up --yes", &[]), "`eas up --yes`");
    }

    #[test]
    fn the_plan_closes_with_the_next_command_and_says_blockers_come_first() {
        let mut plan = Plan::new(&Default::default());
        let selected =
            crate::plan::Selected { layer: "agent-toolkit".into(), env: "k3d-gpu".into(), ..Default::default() };
        plan.select(selected);
        assert_eq!(header(&plan, 80), ["eas up --layer agent-toolkit --env k3d-gpu"]);
        assert!(closing(&plan, 80).is_empty());
        plan.set_apply_command(Some("eas up --yes --pins p.json".into()));
        assert_eq!(header(&plan, 80), ["eas up --yes --pins p.json"]);
        assert_eq!(closing(&plan, 80), ["", "next: eas up --yes --pins p.json"]);
        plan.add_blockers(
            crate::plan::Met::InPhase,
            [crate::plan::Blocker::new(
                crate::plan::PhaseId::Preflight,
                "no Docker",
                "start it",
                crate::plan::Kind::Failed,
            )],
        );
        let c = closing(&plan, 80);
        assert!(c[1].starts_with("next: remove the blockers above"), "{c:?}");
        assert_eq!(c[2], "  eas up --yes --pins p.json");
    }

    #[test]
    fn a_long_command_wraps_as_a_shell_reads_it_and_keeps_each_flag_with_its_value() {
        let cmd = "eas --kubeconfig /tmp/k/kubeconfig up --yes --pins /home/u/.config/eas/pins.json \
                   --containerd-config 'node-0=a b.toml' --eas-repo /mirrors/enterprise-ai-solutions";
        let lines = shell_wrap(cmd, "", 50);
        for l in &lines {
            assert!(l.chars().count() <= 50, "{l:?} in {lines:#?}");
        }
        assert!(lines[..lines.len() - 1].iter().all(|l| l.ends_with(" \\")), "{lines:#?}");
        assert!(lines.iter().any(|l| l.trim_start() == "--containerd-config 'node-0=a b.toml' \\"), "{lines:#?}");
        // Joined back, it is the command again.
        let joined: Vec<String> = lines.iter().map(|l| l.trim().trim_end_matches(" \\").to_string()).collect();
        assert_eq!(joined.join(" "), cmd);
    }
}
