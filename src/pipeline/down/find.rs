//! find: the cluster's identity, its state directory and what it records (read only). The cluster
//! lock is checked, as `eas up` meets it, before any write: the real run refuses on another
//! run's lock or Lease, the dry run lists it. A real run then deletes the probe pods an earlier
//! eas left ([`sweep_probes`]).

use crate::cluster::Cluster;
use crate::error::Failure;
use crate::gather;
use crate::output::Shell;
use crate::plan::{DownId, Step};
use crate::runtime::Interrupt;
use crate::state::StateDir;

use crate::cluster::CALL;
use crate::pipeline::down::cx::{Cx, Down, cancellable};
use crate::pipeline::runner::{Phase, Runner};
use crate::state::run::state_root;

pub struct Find;

/// What the find phase found: nothing installed, or a record to act on.
pub enum Found {
    /// Nothing eas up installed is recorded (this line says so); `sd` may hold an attempt.
    Nothing {
        line: String,
        sd: StateDir,
    },
    Recorded(Box<Recorded>),
}

/// The cluster and the directory of its record.
/// What find settled about the cluster it reached (the cluster itself it hands the context:
/// [`Cx::found`]).
pub struct Recorded {
    /// The kubeconfig context, as the lines name it.
    pub context: String,
    pub sd: StateDir,
    /// What the lock phase would stop on (another run's lock or Lease), as the dry run lists it.
    pub blockers: Vec<String>,
}

impl Recorded {
    pub fn nothing(&self) -> String {
        nothing_recorded(&self.context, &self.sd)
    }
}

impl Phase<Down> for Find {
    const ID: DownId = DownId::Find;
    type Planned = ();
    type Done = Found;

    async fn act(&mut self, (): (), cx: &Cx<'_>, _r: &mut Runner<Down>) -> Result<Found, Failure> {
        let (target, key) = cancellable(cx.interrupt, async {
            let target = gather::target_at(&cx.kube, &cx.proxy, CALL).await?;
            let key = target.cluster.cluster_key(CALL).await.map_err(|e| Failure::step(Step::DownRun, e))?;
            Ok((target, key))
        })
        .await?;
        let sd = StateDir::new(&state_root(cx.global)?, &key)?;
        let blocked = cancellable(cx.interrupt, async {
            Ok(crate::pipeline::phases::lock::blockers(&sd, &target.cluster, cx.args.break_lock).await)
        })
        .await?;
        let blockers = blocked.iter().map(|f| f.lines().join("; ")).collect();
        // Without --yes and a terminal the prompt refuses (bad input, exit 2) before anything acts.
        let may_act = !cx.args.dry_run && (cx.args.yes || std::io::IsTerminal::is_terminal(&std::io::stdin()));
        if may_act && let Some(first) = blocked.into_iter().next() {
            return Err(first);
        }
        if may_act {
            sweep_probes(&target.cluster, cx.shell, cx.interrupt).await?;
        }
        let context = target.context.clone();
        cx.found(target);
        Ok(match nothing_installed(&sd, &context, cx.args.purge)? {
            Some(line) => Found::Nothing { line, sd },
            None => Found::Recorded(Box::new(Recorded { context, sd, blockers })),
        })
    }
}

/// What the state directory says: `None` when it holds a record to act on (or, with `--purge`,
/// is a directory to remove); else the line that says nothing was installed on `context`, with
/// the last attempt's phase and exit code when there was one.
fn nothing_installed(
    sd: &StateDir,
    context: &str,
    purge: bool,
) -> Result<Option<String>, crate::state::journal::JournalError> {
    let records = crate::state::records::Records::read(sd)?;
    if records.install.is_some() || (purge && sd.dir().exists()) {
        return Ok(None);
    }
    Ok(Some(match records.last_run() {
        Some(l) => format!(
            "nothing was installed on {context} by eas up (last attempt: {}, exit {}); nothing to remove",
            l.phase,
            l.exit_code.map_or("-".to_string(), |c| c.to_string())
        ),
        None => nothing_recorded(context, sd),
    }))
}

fn nothing_recorded(context: &str, sd: &StateDir) -> String {
    format!("nothing recorded for {context} in {}: nothing to remove", sd.dir().display())
}

/// The probe pods a killed `--probe-nodes` run left (labelled `io.eas.probe=true`) are eas's own
/// litter: the next real `eas up` or `eas down` deletes them, whatever it then does. A read that
/// fails is a warning: the probe's own sweep tries again.
pub async fn sweep_probes(cluster: &Cluster, shell: &Shell, interrupt: &Interrupt) -> Result<(), Failure> {
    let swept = cancellable(interrupt, async { Ok(gather::probe::sweep(cluster, CALL).await) }).await?;
    match swept {
        Ok(0) => {}
        Ok(n) => shell.phase("probe", format!("deleted {n} probe pod(s) an earlier eas left in kube-system")),
        Err(e) => shell.warn(format!("could not look for probe pods an earlier eas left: {e}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::state_dir;
    use crate::plan::PhaseId;
    use crate::state::journal::{State, Status};

    /// Nothing recorded: the line names the cluster and the directory; an attempt that stopped
    /// before the install: its phase and exit code; a record whose install began: acted on;
    /// `--purge` acts on a directory that exists even without a record.
    #[test]
    fn find_acts_only_on_an_install_record_or_a_directory_to_purge() {
        let (_root, sd) = state_dir();
        let line = nothing_installed(&sd, "k3d-a", false).unwrap().unwrap();
        assert!(line.starts_with("nothing recorded for k3d-a in ") && line.ends_with(": nothing to remove"), "{line}");
        assert_eq!(nothing_installed(&sd, "k3d-a", true).unwrap(), Some(line), "no directory: nothing to purge");
        let mut attempt = State::sample("2026-01-01T00:00:00Z");
        attempt.finish(PhaseId::Lock, Status::Failed, Some("held".into()), "t1");
        attempt.exit_code = Some(3);
        let dir = sd.dir().join(crate::pipeline::settings::ATTEMPT);
        crate::state::journal::create_private_dir(&dir).unwrap();
        attempt.save(&dir.join(crate::state::journal::FILE)).unwrap();
        let line = nothing_installed(&sd, "k3d-a", false).unwrap().unwrap();
        assert!(line.contains("nothing was installed on k3d-a by eas up (last attempt: lock, exit 3)"), "{line}");
        assert_eq!(nothing_installed(&sd, "k3d-a", true).unwrap(), None, "--purge removes the attempt's directory");
        let mut install = State::sample("2026-01-01T00:00:01Z");
        install.begin(PhaseId::Install, None, "t2");
        install.save(&sd.state_file()).unwrap();
        assert_eq!(nothing_installed(&sd, "k3d-a", false).unwrap(), None);
    }
}
