//! The plan as a person reads it (SPEC §4): a summary first, then the decisions as
//! `fact -> choice`, the nodes grouped by shape, the overlay, the phases. Lines fit the width;
//! long values wrap with an indent. Pure: the width and `--explain` come in, a string goes out.

use crate::installer::command::shell_line;
use crate::plan::{self, DryRun, ImageAction, NodeGroup, PatchOutcome, Plan};

/// Not a terminal and no COLUMNS: lines are not wrapped (a pipe or a file keeps whole lines).
pub const UNWRAPPED: usize = usize::MAX;
/// Never narrower than this, so the label column and a few words still fit.
const MIN_WIDTH: usize = 40;
/// The column where the summary's values start (after two spaces and the label).
const LABEL: usize = 13;
/// Continuation lines of a wrapped item are indented this far.
const HANG: usize = 6;

/// The terminal's width: `COLUMNS` when set, else stdout's terminal size, else [`UNWRAPPED`].
pub fn terminal_width(env: &crate::settings::Env) -> usize {
    let columns = env.nonempty("COLUMNS").and_then(|c| c.trim().parse::<usize>().ok()).filter(|c| *c > 0);
    columns.or_else(|| console::Term::stdout().size_checked().map(|(_, cols)| usize::from(cols))).unwrap_or(UNWRAPPED)
}

/// How the summary's last line reads: a dry run wrote nothing; a real run says what it did.
pub enum Ending<'a> {
    DryRun,
    /// A real run that installed: the summary in the past tense, with its log, its record and
    /// how long each phase that ran took (`took`).
    Installed {
        log: Option<&'a str>,
        state: &'a str,
        took: &'a str,
    },
}

#[derive(Clone, Copy)]
pub struct View {
    pub width: usize,
    pub explain: bool,
}

/// Greedy word wrap: the first line starts with `first`, the others with `indent` spaces. A word
/// longer than a line (a permalink) stays whole on a line of its own. Control characters in the
/// words (cluster data: a newline in a version string) are escaped, so a value cannot start a
/// line of its own.
pub fn wrap(text: &str, width: usize, first: &str, indent: usize) -> Vec<String> {
    let width = width.max(MIN_WIDTH);
    let pad = " ".repeat(indent);
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let word = crate::text::escape_controls(word);
        let word = word.as_str();
        let needed = if empty { word.chars().count() } else { word.chars().count() + 1 };
        if !empty && line.chars().count().saturating_add(needed) > width {
            lines.push(std::mem::replace(&mut line, pad.clone()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}

fn labelled(out: &mut Vec<String>, view: View, label: &str, value: &str) {
    let first = format!("  {label:<w$}", w = LABEL - 2);
    out.extend(wrap(value, view.width, &first, LABEL + HANG));
}

fn item(out: &mut Vec<String>, view: View, text: &str) {
    out.extend(wrap(text, view.width, "  ", 2 + HANG));
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

/// The summary a person reads at a glance; a dry run's plan opens with it, a real `eas up`
/// closes with it.
pub fn summary(plan: &Plan, view: View, ending: &Ending) -> Vec<String> {
    // The plan speaks of the run to come; the summary closing a real run, of the run that was.
    let done = matches!(ending, Ending::Installed { .. });
    let mut out = crate::next_command::header(plan, view.width);
    let cluster = match &plan.facts() {
        Some(f) => {
            let k3d = f.k3d_cluster.as_deref().map(|c| format!(" (k3d cluster {c})")).unwrap_or_default();
            let nodes = if f.node_count == 1 { "1 node".to_string() } else { format!("{} nodes", f.node_count) };
            format!("context {}{k3d}, {}, {nodes}", f.context, f.server_version)
        }
        None => "not known (no facts)".to_string(),
    };
    labelled(&mut out, view, "cluster", &cluster);
    for (i, line) in settings_lines(plan.settings()).iter().enumerate() {
        labelled(&mut out, view, if i == 0 { "settings" } else { "" }, line);
    }
    let commits: Vec<String> = plan.commits().iter().map(|(n, sha)| format!("{n} {}", short(sha))).collect();
    let commits = if commits.is_empty() { String::new() } else { format!(": {}", commits.join(", ")) };
    labelled(&mut out, view, "profile", &format!("{}{commits}", plan.profile()));
    labelled(&mut out, view, "pins", plan.pins_source());
    let model = plan.model().as_deref().unwrap_or("not decided");
    let fit = plan.fit().as_deref().map(|f| format!("; {f}")).unwrap_or_default();
    labelled(&mut out, view, "layer", &format!("{}, model {model}{fit}", plan.layer()));
    let patches = match plan.overlay_not_decided().first() {
        Some(why) => format!("not decided ({why})"),
        None => {
            let (apply, skip, stop) = plan::patch_counts(plan.overlay());
            let stop = if stop > 0 { format!("{stop} STOP") } else { "0 stop".to_string() };
            format!("{apply} to apply, {skip} to skip, {stop}")
        }
    };
    labelled(&mut out, view, "decisions", &format!("{} made; patches: {patches}", plan.decisions().len()));
    let image = match &plan.image() {
        Some(i) if i.action == ImageAction::Build => format!("{} {}", if done { "built" } else { "build" }, i.tag),
        Some(i) => format!("{} {}", if done { "reused" } else { "reuse" }, i.tag),
        // Not planned: a blocker of preflight (no Docker Engine) or of the bastion says why.
        None => "not planned (see blockers)".to_string(),
    };
    labelled(&mut out, view, "bastion", &image);
    if plan.commands().is_empty() {
        labelled(&mut out, view, "installer", "not decided");
    }
    for (i, c) in plan.commands().iter().enumerate() {
        labelled(&mut out, view, if i == 0 { "installer" } else { "" }, &shell_line(&c.argv));
    }
    if plan.unknown().is_empty() {
        labelled(&mut out, view, "unknown", "nothing");
    }
    for (i, m) in plan.unknown().iter().enumerate() {
        labelled(&mut out, view, if i == 0 { "unknown" } else { "" }, &format!("{}: {}", m.phase, m.reason));
    }
    let count = plan.blockers().len();
    let stops = match plan.blockers().first() {
        Some(b) => format!("{count}: the real run stops at the first (exit {})", b.exit_code()),
        None if done => "none: every check passed before the first write".to_string(),
        None => "none: the real run passes every check before its first write".to_string(),
    };
    labelled(&mut out, view, "blockers", &stops);
    for b in plan.blockers().iter() {
        let fix = if b.fix.is_empty() { String::new() } else { format!("; fix: {}", b.fix) };
        labelled(&mut out, view, "", &format!("{}: {}{fix}", b.phase, b.cause));
    }
    // Counted at a glance (each is listed in full): a summary that says `blockers none` also says
    // how many warnings the run has.
    let warnings = match plan.warnings().len() {
        0 => "none".to_string(),
        n => n.to_string(),
    };
    labelled(&mut out, view, "warnings", &warnings);
    match ending {
        // What making the plan wrote (the probe pods of --probe-nodes) is said, never hidden
        // behind "nothing was written".
        Ending::DryRun if plan.wrote().is_empty() => out.extend(wrap(
            "Nothing was written to the cluster, the work tree or the state directory.",
            view.width,
            "",
            2,
        )),
        Ending::DryRun => {
            for (i, w) in plan.wrote().iter().enumerate() {
                labelled(&mut out, view, if i == 0 { "wrote" } else { "" }, w);
            }
            out.extend(wrap(
                "Nothing else was written to the cluster, the work tree or the state directory.",
                view.width,
                "",
                2,
            ))
        }
        Ending::Installed { log, state, took } => {
            if let Some(log) = log {
                labelled(&mut out, view, "log", log);
            }
            labelled(&mut out, view, "state", state);
            if !took.is_empty() {
                labelled(&mut out, view, "took", took);
            }
            let on = plan.facts().as_ref().map_or("the cluster", |f| &f.context);
            out.extend(wrap(&format!("Installed {} on {on}.", plan.layer()), view.width, "", 2));
        }
    }
    out
}

/// Every setting that is not a default, and where it came from (`context k3d-gpu (from
/// ./eas.yaml)`), one a line; those given as flags, whose values the command line above the
/// summary shows, on one line by key.
fn settings_lines(settings: &[crate::settings::source::Setting]) -> Vec<String> {
    use crate::settings::source::Source;
    let (flags, rest): (Vec<_>, Vec<_>) = settings.iter().partition(|s| matches!(s.source, Source::Flag(_)));
    let mut lines: Vec<String> = rest.iter().map(|s| s.line()).collect();
    if !flags.is_empty() {
        let keys: Vec<&str> = flags.iter().map(|s| s.key).collect();
        lines.push(format!("from the command line: {}", keys.join(", ")));
    }
    if lines.is_empty() {
        lines.push("defaults only".to_string());
    }
    lines
}

fn group_line(g: &NodeGroup) -> String {
    let mut shape = vec![format!("{} cpu", g.cpu), g.memory.clone()];
    shape.extend(g.devices.iter().map(|(k, v)| format!("{k}={v}")));
    shape.push(g.role.clone());
    let more = g.count.saturating_sub(g.names.len());
    let names = if more > 0 { format!("{} and {more} more", g.names.join(", ")) } else { g.names.join(", ") };
    format!("{} x {}: {names}", g.count, shape.join(", "))
}

/// The whole plan: the summary, then the details.
pub fn render(plan: &Plan, view: View) -> String {
    let mut out = summary(plan, view, &Ending::DryRun);
    let mut section = |title: String, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push(String::new());
            out.push(title);
            out.extend(lines);
        }
    };
    if let Some(f) = &plan.facts() {
        let mut lines = Vec::new();
        for g in &f.node_groups {
            item(&mut lines, view, &group_line(g));
        }
        let shapes =
            if f.node_groups.len() == 1 { "1 shape".to_string() } else { format!("{} shapes", f.node_groups.len()) };
        item(
            &mut lines,
            view,
            &format!(
                "{} namespaces, {} Helm releases; facts sha256 {}",
                f.namespaces,
                f.helm_releases.len(),
                &f.facts_hash[..f.facts_hash.len().min(12)]
            ),
        );
        section(format!("nodes ({}, {shapes}):", f.node_count), lines);
    }
    // Nothing when no earlier run completed.
    if let (Some(kind), Some(since)) = (plan.run_kind(), &plan.since_last()) {
        let lines = crate::state::since::lines(since, view.explain).into_iter().map(|l| format!("  {l}")).collect();
        section(format!("since the last up (run: {kind}, installed {}):", since.installed_at), lines);
    }
    let mut lines = Vec::new();
    for d in plan.decisions().iter() {
        let cite = if view.explain { format!(" [{}]", d.permalink) } else { String::new() };
        item(&mut lines, view, &format!("{} -> {}{cite}", d.fact, d.choice));
    }
    section("decisions (fact -> choice):".into(), lines);
    let mut lines = Vec::new();
    for w in plan.warnings().iter() {
        item(&mut lines, view, w);
    }
    section("warnings:".into(), lines);
    let mut lines = Vec::new();
    for p in plan.overlay().iter() {
        let cite = if view.explain { format!(" [{}]", p.permalink) } else { String::new() };
        let text = format!("{}: {} -> {}{cite}", p.id, p.fact, p.choice);
        lines.extend(wrap(&text, view.width, &format!("  {:<6} ", outcome_mark(p.outcome)), 2 + HANG));
    }
    section("overlay:".into(), lines);
    let mut lines = Vec::new();
    for p in plan.phases().iter() {
        let timeouts = format!("{}/{}", plan::duration(p.plan_timeout_secs), plan::duration(p.timeout_secs));
        let head = format!("  {:<9} {:>9}  {:<9}  ", p.name, timeouts, dry_run_mark(p.dry_run));
        lines.extend(wrap(&p.says, view.width, &head, head.len()));
    }
    section("phases (plan/act timeout, in this dry run):".into(), lines);
    out.extend(crate::next_command::closing(plan, view.width));
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// A patch's outcome as the overlay section marks it.
fn outcome_mark(o: PatchOutcome) -> &'static str {
    match o {
        PatchOutcome::Apply => "apply",
        PatchOutcome::Skip => "skip",
        PatchOutcome::Merged => "merged",
        PatchOutcome::Fixed => "fixed",
        PatchOutcome::Stop => "STOP",
    }
}

/// What the dry run did with a phase, as the phases section marks it (in the past tense).
fn dry_run_mark(d: DryRun) -> &'static str {
    match d {
        DryRun::Runs => "ran",
        DryRun::ReadsOnly => "read-only",
        DryRun::Stops => "not run",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ImagePlan, Met, Missing, PhaseId, Picked, PlanDecision, PlanPatch, Runs, Selected};

    /// The parts of the test's plan a test changes before they are written.
    struct Parts {
        image: ImagePlan,
        decisions: Vec<PlanDecision>,
        overlay: Vec<PlanPatch>,
        unknown: Vec<Missing>,
    }

    fn plan() -> Plan {
        written(parts())
    }

    /// The plan of `parts`, each written by its writer.
    fn written(x: Parts) -> Plan {
        let mut p = Plan::new(&Default::default());
        p.select(Selected {
            layer: "agent-toolkit".into(),
            env: "k3d-gpu".into(),
            profile: "main".into(),
            pins_source: crate::pins::Source::Builtin.label(),
            selection: None,
            commits: [("eas", "074edab1234"), ("ei", "d9b12014afc8"), ("eat", "3a1ac51bc18")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        });
        p.picked(Picked {
            model: Some("qwen2-5-coder-7b (fallback)".into()),
            fit: Some("KV cache: catalog's 40 GiB kept".into()),
            pick: None,
        });
        p.set_image(x.image);
        p.add_decisions(PhaseId::Config, x.decisions);
        p.set_overlay(x.overlay);
        let argv = crate::installer::command::install_argv("agent-toolkit", "k3d-gpu", "/eas/o.yaml").unwrap();
        p.add_command(Runs::Install, argv);
        x.unknown.into_iter().for_each(|m| p.add_unknown(m));
        p
    }

    fn parts() -> Parts {
        let image = ImagePlan { tag: "eas-bastion:3f2a1b".into(), action: ImageAction::Reuse };
        let decisions = vec![PlanDecision {
            fact: "k3s ServiceLB on".into(),
            choice: "metallb_enabled: false".into(),
            source: "intel/enterprise-ai-solutions@c889142 roles/metallb/tasks/install.yaml:23-44".into(),
            permalink:
                "https://github.com/intel/enterprise-ai-solutions/blob/c889142/roles/metallb/tasks/install.yaml#L23-L44"
                    .into(),
        }];
        let overlay = vec![
            PlanPatch {
                id: "0002".into(),
                outcome: PatchOutcome::Apply,
                fact: "needed".into(),
                choice: "apply 0002".into(),
                source: "s".into(),
                permalink: "p".into(),
            },
            PlanPatch {
                id: "0003".into(),
                outcome: PatchOutcome::Skip,
                fact: "not nri".into(),
                choice: "skip 0003".into(),
                source: "s".into(),
                permalink: "p".into(),
            },
        ];
        let unknown = vec![Missing { phase: PhaseId::Bastion, reason: "no Docker Engine answers".into() }];
        Parts { image, decisions, overlay, unknown }
    }

    #[test]
    fn blockers_are_counted_and_listed_with_their_fix_and_an_undecided_overlay_says_so() {
        use crate::plan::Blocker;
        let mut x = parts();
        x.overlay.clear();
        let mut p = written(x);
        p.not_decided_by(PhaseId::Trees, "the trees could not be read");
        p.add_blockers(
            Met::InPhase,
            [
                Blocker::new(
                    PhaseId::Bastion,
                    "the base image ubuntu:24.04 is not pinned by digest",
                    "pass --base-image",
                    crate::plan::Kind::BadInput,
                ),
                Blocker::new(PhaseId::Trees, "cannot fetch EAS", "pass --eas-repo", crate::plan::Kind::Failed),
            ],
        );
        let text = render(&p, View { width: 200, explain: false });
        assert!(text.contains("patches: not decided (the trees could not be read)"), "{text}");
        assert!(!text.contains("0 stop"), "{text}");
        assert!(text.contains("  blockers   2: the real run stops at the first (exit 2)\n"), "{text}");
        assert!(
            text.contains(
                "\n             bastion: the base image ubuntu:24.04 is not pinned by digest; fix: pass --base-image\n"
            ),
            "{text}"
        );
        assert!(text.contains("\n             trees: cannot fetch EAS; fix: pass --eas-repo\n"), "{text}");
    }

    #[test]
    fn a_plan_that_wrote_its_probe_pods_says_so_instead_of_nothing_written() {
        let mut p = plan();
        p.set_wrote(vec!["probe pod kube-system/eas-probe-n1-0000a on node n1, created and deleted".into()]);
        let text = render(&p, View { width: 200, explain: false });
        assert!(
            text.contains("\n  wrote      probe pod kube-system/eas-probe-n1-0000a on node n1, created and deleted\n"),
            "{text}"
        );
        assert!(text.contains("\nNothing else was written to the cluster"), "{text}");
        assert!(!text.contains("Nothing was written"), "{text}");
    }

    #[test]
    fn the_summary_closing_a_real_run_says_what_happened_in_the_past_tense_and_how_long_it_took() {
        let mut x = parts();
        x.image.action = ImageAction::Build;
        let p = written(x);
        let ending =
            Ending::Installed { log: Some("/s/logs/run.log"), state: "/s/state.json", took: "lock 0:01 (total 0:01)" };
        let text = summary(&p, View { width: 200, explain: false }, &ending).join("\n");
        assert!(text.contains("\n  bastion    built eas-bastion:3f2a1b\n"), "{text}");
        assert!(text.contains("\n  blockers   none: every check passed before the first write\n"), "{text}");
        assert!(text.contains("\n  took       lock 0:01 (total 0:01)\n"), "{text}");
        assert!(!text.contains("the real run passes") && !text.contains("build eas-bastion"), "{text}");
        // The plan keeps the future tense.
        let plan_text = summary(&p, View { width: 200, explain: false }, &Ending::DryRun).join("\n");
        assert!(
            plan_text.contains("  bastion    build eas-bastion:3f2a1b") && !plan_text.contains("took"),
            "{plan_text}"
        );
    }

    #[test]
    fn summary_comes_first_and_ends_with_nothing_written() {
        use crate::settings::source::{Setting, Source};
        let mut p = plan();
        assert!(render(&p, View { width: 100, explain: false }).contains("\n  settings   defaults only\n"));
        p.set_settings(vec![
            Setting { key: "context", value: "k3d-gpu".into(), source: Source::File("./eas.yaml".into()) },
            Setting { key: "layer", value: "agent-toolkit".into(), source: Source::Flag("--layer") },
            Setting { key: "env", value: "k3d-gpu".into(), source: Source::Flag("--env") },
        ]);
        let text = render(&p, View { width: 100, explain: false });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "eas up --layer agent-toolkit --env k3d-gpu");
        assert_eq!(lines[1], "  cluster    not known (no facts)");
        // Every setting that is not a default, each with its source.
        assert_eq!(lines[2], "  settings   context k3d-gpu (from ./eas.yaml)");
        assert_eq!(lines[3], "             from the command line: layer, env");
        let lines = [&lines[..2], &lines[4..]].concat();
        assert_eq!(lines[2], "  profile    main: eas 074edab, eat 3a1ac51, ei d9b1201");
        assert_eq!(lines[3], "  pins       built-in");
        let lines = [&lines[..3], &lines[4..]].concat();
        assert_eq!(
            lines[3],
            "  layer      agent-toolkit, model qwen2-5-coder-7b (fallback); KV cache: catalog's 40 GiB kept"
        );
        assert_eq!(lines[4], "  decisions  1 made; patches: 1 to apply, 1 to skip, 0 stop");
        assert_eq!(lines[5], "  bastion    reuse eas-bastion:3f2a1b");
        assert!(lines[6].starts_with("  installer  ./es_auto_installer.sh install agent-toolkit"), "{}", lines[6]);
        assert_eq!(lines[7], "  unknown    bastion: no Docker Engine answers");
        assert_eq!(lines[8], "  blockers   none: the real run passes every check before its first write");
        assert_eq!(lines[9], "  warnings   none");
        assert_eq!(lines[10], "Nothing was written to the cluster, the work tree or the state directory.");
        let mut warned = plan();
        warned.add_warnings(PhaseId::Config, ["a".to_string(), "b".to_string()]);
        let text = render(&warned, View { width: 100, explain: false });
        assert!(text.contains("\n  warnings   2\n") && text.contains("\nwarnings:\n  a\n  b\n"), "{text}");
        assert!(text.contains("\n  k3s ServiceLB on -> metallb_enabled: false\n"), "{text}");
        assert!(!text.contains("c889142"), "no source without --explain:\n{text}");
        assert!(text.contains("\n  apply  0002: needed -> apply 0002\n"), "{text}");
    }

    #[test]
    fn explain_adds_permalinks_and_long_lines_wrap_with_an_indent() {
        let text = render(&plan(), View { width: 60, explain: true });
        for line in text.lines() {
            assert!(
                line.chars().count() <= 60 || !line.trim_start().contains(' '),
                "a line over 60 columns that could wrap: {line:?}"
            );
        }
        let i = text.lines().position(|l| l == "  k3s ServiceLB on -> metallb_enabled: false").expect(&text);
        let next = text.lines().nth(i + 1).unwrap();
        assert_eq!(
            next,
            "        [https://github.com/intel/enterprise-ai-solutions/blob/c889142/roles/metallb/tasks/install.yaml#L23-L44]"
        );
    }

    /// Cluster text with a newline (an API server's version string) stays on its line: it cannot
    /// forge a line of the plan, a REFUSE: line say.
    #[test]
    fn a_newline_in_cluster_data_cannot_start_a_line() {
        let mut x = parts();
        x.decisions[0].fact = "k3s v1.31\nREFUSE: forged".into();
        x.unknown[0].reason = "no Docker\r\nNothing was written".into();
        let p = written(x);
        let text = render(&p, View { width: 100, explain: false });
        assert!(!text.lines().any(|l| l.starts_with("REFUSE:")), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("Nothing was written")).count(), 1, "{text}");
        assert!(text.contains("k3s v1.31\\nREFUSE: forged -> metallb_enabled: false"), "{text}");
        assert!(text.contains("no Docker\\r\\nNothing was written"), "{text}");
    }

    #[test]
    fn stop_is_counted_and_shouted() {
        let mut x = parts();
        x.overlay[1].outcome = PatchOutcome::Stop;
        let p = written(x);
        let text = render(&p, View { width: 100, explain: false });
        assert!(text.contains("patches: 1 to apply, 0 to skip, 1 STOP"), "{text}");
        assert!(text.contains("\n  STOP   0003:"), "{text}");
    }

    #[test]
    fn wrap_keeps_words_and_indents() {
        let lines = wrap("aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk", 40, "  ", 8);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 40));
        assert!(lines[1].starts_with("        h"), "{lines:?}");
        assert_eq!(wrap("short", 80, "- ", 4), ["- short"]);
    }

    #[test]
    fn unwrapped_keeps_each_line_whole() {
        let long = "word ".repeat(100);
        assert_eq!(wrap(&long, UNWRAPPED, "  ", 8).len(), 1);
    }

    #[test]
    fn groups_name_at_most_three_nodes() {
        let g = NodeGroup {
            count: 1998,
            names: vec!["a".into(), "b".into(), "c".into()],
            cpu: "16".into(),
            memory: "62.8 GiB".into(),
            devices: Default::default(),
            role: "worker".into(),
        };
        assert_eq!(group_line(&g), "1998 x 16 cpu, 62.8 GiB, worker: a, b, c and 1995 more");
    }
}
