//! The domain modules' errors as [`Failure`]s: each module has its own error type and knows no
//! exit code; here each kind of failure gets its exit code (SPEC §2) and the command that fixes
//! it. The mapping lives in the command layer, above every domain module (so `crate::error`, the
//! lowest layer, imports none of them); the run's pipeline uses it through `?` as the commands do.

use crate::act::bastion::BastionError;
use crate::error::Failure;
use crate::kubeconfig::TargetError;
use crate::overlay::{ApplyError, DataError, GitError, OverlayError};

impl From<OverlayError> for Failure {
    fn from(e: OverlayError) -> Self {
        match e {
            OverlayError::Data(e) => e.into(),
            OverlayError::Git(e) => e.into(),
            OverlayError::Apply(a) => {
                let a = *a;
                apply_failure(a.source, &a.repo, &a.commit, a.stops)
            }
        }
    }
}

/// A saved plan (`eas up --plan DIR`) that cannot be read or is not one eas makes: bad input; one
/// with blockers: a refusal, since the real run would never carry it out.
impl From<crate::plan::saved::SavedError> for Failure {
    fn from(e: crate::plan::saved::SavedError) -> Self {
        use crate::plan::saved::SavedError;
        let save = "save a plan with `eas up --dry-run --out DIR`, review it, then run `eas up --plan DIR`";
        match e {
            SavedError::Read(r) => Failure::read(&r, save),
            SavedError::NotAPlan { .. } => Failure::bad_input(e.to_string(), save),
            SavedError::Blocked { ref file, ref causes } => {
                let mut lines = vec![format!(
                    "REFUSE: the saved plan {file} lists blockers; a plan with blockers is never applied"
                )];
                lines.extend(causes.iter().map(|c| format!("  {c}")));
                lines.push(
                    "next: remove the blockers it names, then save the plan again with `eas up --dry-run --out DIR`"
                        .into(),
                );
                Failure::Blocked { lines, kind: crate::plan::Kind::Refusal }
            }
        }
    }
}

impl From<DataError> for Failure {
    fn from(e: DataError) -> Self {
        Failure::bad_input(
            e.to_string(),
            "the overlay directory must hold an eas-overlay/v1 overlay.json and its patches; omit --overlay to use the one built into eas",
        )
    }
}

impl From<GitError> for Failure {
    fn from(e: GitError) -> Self {
        match e {
            GitError::NotARepo { .. } => {
                Failure::bad_input(e.to_string(), "pass --repo the directory of an EAS git clone")
            }
            GitError::NoCommit { .. } => {
                Failure::bad_input(e.to_string(), "check out the pinned EAS commit in that clone")
            }
            GitError::Run(crate::git::RunError::Spawn(_)) => {
                Failure::step_next(crate::plan::PhaseId::Overlay, e, "install git (eas doctor checks for it)")
            }
            GitError::Run(crate::git::RunError::TimedOut(_) | crate::git::RunError::Closing) => Failure::step_next(
                crate::plan::PhaseId::Overlay,
                e,
                "re-run `eas overlay --repo DIR`; the clone was not changed",
            ),
            GitError::Failed { .. } | GitError::Scratch(_) => Failure::step_next(
                crate::plan::PhaseId::Overlay,
                e,
                "re-run `eas overlay --repo DIR`; the clone was not changed",
            ),
        }
    }
}

fn apply_failure(e: ApplyError, repo: &std::path::Path, commit: &str, stops: Vec<String>) -> Failure {
    let dir = repo.display();
    match e {
        ApplyError::Git(g) => g.into(),
        ApplyError::Stopped { .. } => Failure::OverlayStop(stops),
        ApplyError::HeadMoved { .. } => Failure::bad_input(
            e.to_string(),
            format!("check out {commit} in {dir} (`git -C {dir} checkout {commit}`) and decide again"),
        ),
        // `reset --hard` clears staged changes as well as the work tree's (`checkout -- .` would
        // copy staged changes back); `stash` keeps them instead.
        ApplyError::Dirty { .. } => {
            let q = shell_quote(&dir.to_string());
            Failure::bad_input(
                e.to_string(),
                format!(
                    "nothing was written; restore the pinned tree with `git -C {q} reset --hard HEAD` \
                     (discards those changes; `git -C {q} stash` keeps them) and re-run"
                ),
            )
        }
        ApplyError::Conflict { .. } => Failure::OverlayStop(vec![
            e.to_string(),
            "two rows patch the same lines: regenerate the later row against the earlier one".into(),
        ]),
    }
}

/// A path as one shell word, so a hint can be pasted as it is.
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Exit 130 on SIGINT/SIGTERM; exit 1 when the runtime or the signal handlers cannot start.
impl From<crate::runtime::RuntimeError> for Failure {
    fn from(e: crate::runtime::RuntimeError) -> Self {
        use crate::runtime::RuntimeError as R;
        match e {
            R::Interrupted => Failure::Interrupted,
            R::Start(_) => Failure::step(crate::plan::Step::Runtime, e),
            R::Signals(_) => Failure::step(crate::plan::Step::Signals, e),
        }
    }
}

/// Exit 2: no usable state directory; nothing written.
impl From<crate::state::StateDirError> for Failure {
    fn from(e: crate::state::StateDirError) -> Self {
        Failure::bad_input(e.to_string(), "pass --state-dir DIR")
    }
}

/// Exit 1: another run holds the cluster, or a stale lock needs --break-lock.
impl From<crate::state::lock::LockError> for Failure {
    fn from(e: crate::state::lock::LockError) -> Self {
        let hint = e.hint();
        Failure::step_next(crate::plan::PhaseId::Lock, e, hint)
    }
}

/// Exit 2 for a record of another schema or a damaged one (nothing is written over it);
/// exit 1 when the file cannot be read or written.
impl From<crate::state::journal::JournalError> for Failure {
    fn from(e: crate::state::journal::JournalError) -> Self {
        let hint = e.hint();
        match e {
            crate::state::journal::JournalError::Read { source, .. }
                if source.kind() == std::io::ErrorKind::Interrupted =>
            {
                Failure::Interrupted
            }
            crate::state::journal::JournalError::Read { .. } | crate::state::journal::JournalError::Write { .. } => {
                Failure::step_next(crate::plan::Step::State, e, hint)
            }
            _ => Failure::bad_input(e.to_string(), hint),
        }
    }
}

/// Exit 1: the installer's env files are not what eas expects (nothing reached the cluster).
impl From<crate::act::prepare::global_config::GlobalConfigError> for Failure {
    fn from(e: crate::act::prepare::global_config::GlobalConfigError) -> Self {
        let hint = e.hint();
        Failure::step_next(crate::plan::PhaseId::Prepare, e, hint)
    }
}

impl From<crate::act::prepare::models::ModelsError> for Failure {
    fn from(e: crate::act::prepare::models::ModelsError) -> Self {
        let hint = e.hint();
        Failure::step_next(crate::plan::PhaseId::Prepare, e, hint)
    }
}

/// Exit 2: the pinned tree is one eas cannot drive (a `--ref` to an old commit); nothing written.
impl From<crate::installer::command::GrammarError> for Failure {
    fn from(e: crate::installer::command::GrammarError) -> Self {
        let hint = e.hint();
        Failure::bad_input(e.to_string(), hint)
    }
}

/// Exit 2: a `--layer` or `--env` the installer would misread.
impl From<crate::installer::command::CommandError> for Failure {
    fn from(e: crate::installer::command::CommandError) -> Self {
        Failure::bad_input(
            e.to_string(),
            "use --layer agent-toolkit or inference, and an --env of letters, digits, '.', '_' and '-'",
        )
    }
}

impl From<BastionError> for Failure {
    fn from(e: BastionError) -> Self {
        use BastionError as B;
        match e {
            B::Pins(p) => p.into(),
            B::InPins { pins, source } => match Failure::from(B::Context(source)) {
                Failure::BadInput { cause, hint } => {
                    Failure::BadInput { cause: format!("{cause} (pins: {pins})"), hint }
                }
                other => other,
            },
            B::Interrupted => Failure::Interrupted,
            // A blocker (exit 1): the image this context built was changed since.
            B::Toolbox { .. } => Failure::step_next(
                crate::plan::PhaseId::Bastion,
                e,
                "the image was changed after eas built it: rebuild it with `eas bastion build --rebuild`",
            ),
            // A blocker (exit 1): this eas's image would lack a tool the installer calls.
            B::Context(crate::act::bastion::context::ContextError::ToolsUnprovided(_)) => Failure::step_next(
                crate::plan::PhaseId::Bastion,
                e,
                "bastion/Dockerfile must provide every tool of data/toolbox.json (a package of its package step, \
                 or a pinned artifact it copies)",
            ),
            B::Context(ref c) => Failure::bad_input(
                e.to_string(),
                match c {
                    crate::act::bastion::context::ContextError::UnpinnedBase { .. } => {
                        "pass --base-image REF@sha256:<digest> (or EAS_BASE_IMAGE), record the digest with \
                     `eas bastion build --lock` on a connected machine, or add --allow-unpinned-base for a local test image"
                    }
                    crate::act::bastion::context::ContextError::MissingSha256(_) => {
                        "on a connected machine run `eas bastion build --lock` (checked against each publisher's checksum; \
                     it writes the pins file `eas pins show` names), or write the publisher's sha256 into that file"
                    }
                    crate::act::bastion::context::ContextError::LockMalformed { .. }
                    | crate::act::bastion::context::ContextError::LockStale(_) => crate::hints::PYTHON_LOCK,
                    crate::act::bastion::context::ContextError::ToolsUnprovided(_) => unreachable!("mapped above"),
                },
            ),
            B::Publisher(crate::act::bastion::publisher::PublisherError::Artifact(a)) => B::Artifact(a).into(),
            B::Publisher(p) => Failure::Refused(vec![
                p.to_string(),
                "nothing was recorded; pass --trust-on-first-use to record the download as it is \
                 (its pins row's source will say so), or write the publisher's sha256 into the pins file"
                    .into(),
            ]),
            B::Artifact(crate::act::bastion::artifacts::ArtifactError::Mismatch { .. }) => Failure::step_next(
                crate::plan::Step::BastionArtifacts,
                e,
                "do not use this download; if the publisher changed the file on purpose, re-pin it in the pins file (`eas pins show`)",
            ),
            B::Artifact(crate::act::bastion::artifacts::ArtifactError::Cache { ref path, .. }) => {
                let next = format!(
                    "the artifact cache must be writable and have free space: fix {path}, or point XDG_CACHE_HOME at another directory, then re-run `eas bastion build`"
                );
                Failure::step_next(crate::plan::Step::BastionArtifacts, e, next)
            }
            B::Artifact(_) => Failure::step_next(
                crate::plan::Step::BastionArtifacts,
                e,
                "check network access (HTTPS_PROXY behind a proxy) and re-run `eas bastion build`",
            ),
            B::Image(crate::act::bastion::image::ImageError::Connect(_)) => {
                Failure::step_next(crate::plan::Step::Docker, e, crate::hints::DOCKER)
            }
            B::Image(crate::act::bastion::image::ImageError::BaseMissing(ref r)) => {
                let hint = crate::hints::base_missing(r);
                Failure::bad_input(e.to_string(), hint)
            }
            B::Image(crate::act::bastion::image::ImageError::Build { known: Some(k), .. }) => {
                Failure::step_next(crate::plan::Step::BastionBuild, e, k.fix())
            }
            B::Image(crate::act::bastion::image::ImageError::Build { .. }) => Failure::step_next(
                crate::plan::Step::BastionBuild,
                e,
                "fix the failing step (its last lines are above) and re-run `eas bastion build`; behind a TLS-intercepting proxy pass --ca-bundle",
            ),
            B::Image(crate::act::bastion::image::ImageError::TimedOut { .. }) => Failure::step_next(
                crate::plan::Step::BastionBuild,
                e,
                "a cold build downloads the tools and installs the installer's Python packages: check the network (HTTPS_PROXY behind a proxy), then re-run",
            ),
            B::Image(crate::act::bastion::image::ImageError::Pull { ref reference, .. }) => {
                let hint = crate::hints::pull_failed(reference);
                Failure::step_next(crate::plan::PhaseId::Bastion, e, hint)
            }
            B::Image(_) => Failure::step_next(
                crate::plan::PhaseId::Bastion,
                e,
                "check the Docker Engine (`docker info`) and re-run",
            ),
            B::Run(_) => Failure::step(crate::plan::Step::BastionRun, e),
            B::Kubeconfig(_) | B::Input(_) => Failure::bad_input(e.to_string(), "see `eas bastion --help`"),
            B::Io { .. } => Failure::step(crate::plan::PhaseId::Bastion, e),
            B::Busy(_) => Failure::step_next(
                crate::plan::PhaseId::Bastion,
                e,
                "another eas is building this image: let it finish (or stop it), then re-run",
            ),
        }
    }
}

/// The kubeconfig: a plugin's failure is a run-time step (exit 1), an interrupted read exit 130,
/// anything else bad input (exit 2).
impl From<TargetError> for Failure {
    fn from(e: TargetError) -> Self {
        match e {
            TargetError::Plugin(line) => Failure::step(crate::plan::Step::Kubeconfig, line),
            TargetError::Interrupted => Failure::Interrupted,
            e => Failure::bad_input(e.to_string(), e.hint()),
        }
    }
}

/// A facts document: interrupted is exit 130, anything else bad input with its hint.
impl From<crate::facts::FactsError> for Failure {
    fn from(e: crate::facts::FactsError) -> Self {
        use crate::facts::FactsError;
        match &e {
            FactsError::Read { source, .. } if source.kind() == std::io::ErrorKind::Interrupted => Failure::Interrupted,
            _ => Failure::bad_input(e.to_string(), e.hint()),
        }
    }
}

/// The configuration: a refusal is exit 3, a stale output that cannot be removed exit 1,
/// anything else bad input (exit 2) with the flag or file that fixes it.
impl From<crate::config::ConfigError> for Failure {
    fn from(e: crate::config::ConfigError) -> Self {
        use crate::config::ConfigError as C;
        match e {
            C::Pins(p) => p.into(),
            C::FloatingRef(_) => {
                Failure::bad_input(e.to_string(), "resolve it first (`git rev-parse <ref>`), or use --profile")
            }
            C::Refused(reasons) => Failure::Refused(reasons),
            C::BadInput { cause, hint } => Failure::bad_input(cause, hint),
            C::Stale { .. } => Failure::step(crate::plan::Step::Write, e),
            C::CatalogRead(r) => Failure::read(&r, "give a readable EI model_manager/models.yaml to --catalog"),
            C::CatalogParse { .. } => Failure::bad_input(e.to_string(), "give EI's model_manager/models.yaml"),
            C::FitRead(r) => Failure::read(&r, "check the path given to --fit"),
            C::FitParse { .. } => Failure::bad_input(
                e.to_string(),
                "give the JSON `k3d-gpu fit` writes: {\"candidates\": {\"<model>\": {\"fits\": .., \"env\": .., \"args\": ..}}}",
            ),
        }
    }
}

/// The gatherer: the kubeconfig's and the API's failures as theirs, malformed operator answers
/// and node args bad input.
impl From<crate::gather::GatherError> for Failure {
    fn from(e: crate::gather::GatherError) -> Self {
        match e {
            crate::gather::GatherError::Target(t) => t.into(),
            crate::gather::GatherError::Api(a) => Failure::step_next(crate::plan::PhaseId::Facts, &a, a.next()),
            crate::gather::GatherError::NodeArgs(e) => Failure::bad_input(e.to_string(), e.hint()),
            crate::gather::GatherError::Refused(reasons) => Failure::Refused(reasons),
            // A failed sweep of old probe pods keeps the exit it had as text (2), as the operator's input.
            crate::gather::GatherError::Operator(_) | crate::gather::GatherError::Sweep(_) => Failure::bad_input(
                e.to_string(),
                "see `eas facts --help`: --containerd-config NODE=FILE, --nri-socket NODE=present|absent",
            ),
        }
    }
}

/// Verification: a failed check is exit 5 with every line; nothing installed is a step (exit 1)
/// with the commands that install.
impl From<crate::verify::VerifyError> for Failure {
    fn from(e: crate::verify::VerifyError) -> Self {
        use crate::verify::VerifyError as V;
        match e {
            V::Failed(lines) => Failure::Verify(lines),
            V::NotInstalled { ref devices, .. } if !devices.is_empty() => {
                let mut lines: Vec<String> = devices.iter().map(|l| format!("verify: {l}")).collect();
                lines.push(format!("error: verify: {e}"));
                lines.push(
                    "next: fix the device nodes marked FAIL (their plugin pods and events are named above); \
                     nothing is installed: `eas up --dry-run`, then `eas up`"
                        .to_string(),
                );
                Failure::Blocked { lines, kind: crate::plan::Kind::Failed }
            }
            V::NotInstalled { .. } => {
                Failure::step_next(crate::plan::PhaseId::Verify, e, "run `eas up --dry-run`, then `eas up`")
            }
        }
    }
}

/// Exit 1: a path under the state directory that cannot be made or written, with a `next:` line
/// for its cause (a full disk, a read-only file system, permissions).
impl From<crate::state::run::PathIoError> for Failure {
    fn from(e: crate::state::run::PathIoError) -> Self {
        let next = e.hint();
        Failure::step_next(e.step, e, next)
    }
}

/// Exit 1: the dead run's containers could not be listed or removed, so this run does not act.
impl From<crate::act::reap::ReapError> for Failure {
    fn from(e: crate::act::reap::ReapError) -> Self {
        use crate::act::reap::ReapError as R;
        let next = match &e {
            R::List(_) => "check the Docker Engine".to_string(),
            R::Remove { name, .. } => format!("remove it with `docker rm -f {name}`, then run the command again"),
        };
        Failure::step_next(crate::plan::PhaseId::Lock, e, next)
    }
}

/// Prepare and install: each wrapped error as its own module's; the installer's own failure
/// exit 1 in its step, with what to do.
impl From<crate::act::install::InstallError> for Failure {
    fn from(e: crate::act::install::InstallError) -> Self {
        use crate::act::install::InstallError as I;
        let cause = e.to_string();
        match e {
            I::Kubeconfig(t) => t.into(),
            I::Bastion(b) => b.into(),
            I::Log(p) => p.into(),
            I::Run(_) => Failure::step(crate::plan::Step::BastionRun, cause),
            I::Interrupted => Failure::Interrupted,
            I::Grammar(g) => g.into(),
            I::Command(c) => c.into(),
            I::Prepare { .. } => Failure::step(crate::plan::PhaseId::Prepare, cause),
            I::GlobalConfig(g) => g.into(),
            I::Models(m) => m.into(),
            I::Installer { step, next, .. } => Failure::step_next(step, cause, next),
        }
    }
}

/// The pinned catalog: unreadable or not a catalog is a refusal (exit 3); a `--model` it does not
/// hold bad input (exit 2).
impl From<crate::gather::catalog::CatalogError> for Failure {
    fn from(e: crate::gather::catalog::CatalogError) -> Self {
        use crate::gather::catalog::CatalogError as C;
        match e {
            C::Unreadable { .. } | C::NotACatalog { .. } => Failure::Refused(vec![e.to_string()]),
            C::BadInput { cause, hint } => Failure::bad_input(cause, hint),
            C::Refused(reasons) => Failure::Refused(reasons),
        }
    }
}

/// Exit 1: a search of the pinned trees did not answer.
impl From<crate::gather::knob_audit::AuditError> for Failure {
    fn from(e: crate::gather::knob_audit::AuditError) -> Self {
        Failure::step_next(crate::plan::Step::Audit, e, "re-run; the trees in the cache were not changed")
    }
}

/// Exit 2: a flag the settings cannot take, with the flag that fixes it.
impl From<crate::cli::UsageError> for Failure {
    fn from(e: crate::cli::UsageError) -> Self {
        Failure::bad_input(e.cause, e.hint)
    }
}

/// `eas completions` and `eas man`: a bad `--out` is bad input (exit 2); a write that failed exit 1.
impl From<crate::cli::docs::DocsError> for Failure {
    fn from(e: crate::cli::docs::DocsError) -> Self {
        use crate::cli::docs::DocsError as D;
        match e {
            D::Completions(_) => Failure::step(crate::plan::Step::Completions, e),
            D::NotADir(_) => Failure::bad_input(e.to_string(), "pass a directory (it is created when missing)"),
            D::Render(_) | D::Write { .. } => Failure::step(crate::plan::Step::Man, e),
            D::Create { .. } => Failure::bad_input(e.to_string(), "pass a writable directory"),
        }
    }
}

/// `eas verify` against the record: each wrapped error as its module's; the cluster's key that
/// could not be read exit 1, in verify's step.
impl From<crate::verify::recorded::RecordedError> for Failure {
    fn from(e: crate::verify::recorded::RecordedError) -> Self {
        use crate::verify::recorded::RecordedError as R;
        match e {
            R::Gather(g) => (*g).into(),
            R::Key(a) => Failure::step_next(crate::plan::PhaseId::Verify, &a, a.next()),
            R::StateDir(s) => s.into(),
            R::Verify(v) => v.into(),
            R::Runtime(r) => r.into(),
            R::Record(j) => j.into(),
        }
    }
}

#[cfg(test)]
#[path = "edge_tests.rs"]
mod tests;
