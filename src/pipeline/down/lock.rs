//! lock: this cluster's lock and the cluster's Lease taken as `eas up` takes them
//! (`--break-lock` takes over a dead run's, first stopping and removing the containers it may
//! have left running on this engine, found by the run ids its lock and its Lease name, so the
//! teardown never runs beside them), then the record loaded under the lock into the runner's
//! journal. Both are held until `down` ends, whatever the outcome (its clean-up releases them
//! when a later phase fails).

use std::pin::Pin;

use crate::cluster;
use crate::error::Failure;
use crate::plan::DownId;
use crate::state::journal::State;
use crate::state::lock;

use crate::cluster::CALL;
use crate::pipeline::down::cx::{Cx, Down, Loaded, cancellable};
use crate::pipeline::down::find::Recorded;
use crate::pipeline::down::removal::Removal;
use crate::pipeline::phases::lock as up_lock;
use crate::pipeline::runner::{Hold, Phase, Runner};
use crate::state::run::now;

pub struct Lock<'a> {
    pub found: &'a Recorded,
}

impl Phase<Down> for Lock<'_> {
    const ID: DownId = DownId::Lock;
    type Planned = ();
    /// What the loaded record asks of the removal (none: nothing is recorded, nothing to remove).
    type Done = Option<Removal>;

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner<Down>) -> Result<Option<Removal>, Failure> {
        let (sd, cluster) = (&self.found.sd, cx.cluster()?);
        let break_lock = cx.args.break_lock;
        let dead = crate::act::reap::dead_holder(&sd.lock_file(), break_lock);
        let local = lock::acquire(&sd.lock_file(), "eas down", &now(), break_lock)?;
        let docker = if break_lock { Some(cx.docker().await?) } else { None };
        let lease_dead =
            cancellable(cx.interrupt, up_lock::reap_stale_holder(cluster, docker, break_lock, cx.shell)).await?;
        if let (Some(holder), Some(docker)) = (&dead, docker)
            && lease_dead.as_deref() != Some(holder.run_id().as_str())
        {
            cancellable(cx.interrupt, async { Ok(crate::act::reap::reap(docker, &holder.run_id(), cx.shell).await?) })
                .await?;
        }
        let identity = up_lock::identity(&local.holder);
        let duration = cluster::lease::duration_from(cx.global.env.var(up_lock::LEASE_SECS));
        let taken = cancellable(cx.interrupt, async {
            let here = &up_lock::holder_here;
            cluster
                .take_lease(&identity, (break_lock, here), CALL, duration)
                .await
                .map_err(|e| Failure::step_next(DownId::Lock, e, "check the API server (`eas doctor`)"))
        })
        .await?;
        let lease = match taken {
            cluster::lease::Taken::Held(held) => held,
            cluster::lease::Taken::Refused(f) => {
                return Err(up_lock::lease_blocker(&f, break_lock)
                    .err()
                    .unwrap_or_else(|| Failure::step(DownId::Lock, "the cluster's Lease could not be taken")));
            }
        };
        // Held from here: the clean-up releases both when a later phase fails.
        r.hold(Hold { local, lease });
        if let Some(id) = &lease_dead {
            cx.shell.note(format!("took over the cluster's Lease from the run {id}, which is gone"));
        }
        let file = sd.state_file();
        let Some(state) = State::load(&file)? else {
            cx.shell.phase("down", self.found.nothing());
            return Ok(None);
        };
        let removal = Removal::of(cx, &state);
        *r.record_mut() = Some(Loaded { state, file, started: now() });
        Ok(Some(removal))
    }

    /// Releases the cluster's Lease, then the lock file.
    fn cleanup(r: &mut Runner<Down>) -> Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(r.release())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fake::Fake;
    use crate::pipeline::down::cx::tests::{plain, settings};
    use crate::pipeline::down::removal::How;
    use crate::pipeline::phases::lock::tests::{LEASE_PATH, lease_held as lease};
    use crate::plan::DownTimeouts;
    use crate::runtime::Interrupt;
    use crate::settings::Global;

    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

    /// What `find` hands the lock: the context `k3d-gpu` and its state directory under `root`.
    fn found(root: &std::path::Path) -> Recorded {
        let sd = crate::pipeline::phases::preflight::sample(root).sd;
        Recorded { context: "k3d-gpu".into(), sd, blockers: Vec::new() }
    }

    /// The lock phase of a `down` on `fake` (the API server creates the Lease when asked), with
    /// `record` saved in the state directory first: what the phase returned, the runner holding
    /// what it took, and what `find` handed it.
    async fn locked(
        fake: &Fake,
        root: &std::path::Path,
        record: Option<&State>,
    ) -> (Result<Option<Removal>, Failure>, Runner<Down>, Recorded) {
        fake.answer("POST", LEASES, 201, lease(&mine(), 0));
        let found = found(root);
        if let Some(state) = record {
            state.save(&found.sd.state_file()).unwrap();
        }
        let (args, global, shell, interrupt) = (settings(), Global::default(), plain(), Interrupt::default());
        let cx = Cx::new(&args, &global, &shell, &interrupt);
        // The recorded cluster `k3d-gpu-desktop` on `fake`, as find reached it.
        cx.found(crate::pipeline::phases::preflight::sample_target(fake.cluster()));
        let mut r = Runner::down(DownTimeouts::set([]), Interrupt::default());
        let done = r.act_phase(Lock { found: &found }, (), &cx).await;
        (done, r, found)
    }

    /// This process's identity as the phase writes it into the Lease.
    fn mine() -> String {
        up_lock::identity(&lock::Holder::current("eas down", &now()))
    }

    /// Nothing recorded: the lock file and the Lease (read, found absent, created) are taken and
    /// held past the phase, which finds nothing to remove; the runner's clean-up deletes the Lease
    /// it holds, then the lock file.
    #[tokio::test]
    async fn the_lock_file_and_the_lease_are_held_until_the_clean_up_with_nothing_recorded() {
        let (root, fake) = (tempfile::tempdir().unwrap(), Fake::recorded("k3d-gpu-desktop"));
        let (done, mut r, found) = locked(&fake, root.path(), None).await;
        let Ok(removal) = done else { panic!("the lock taken") };
        assert!(removal.is_none(), "no record: nothing to remove");
        assert!(r.record_mut().is_none());
        assert_eq!(fake.asked(), [format!("GET {LEASE_PATH}"), format!("POST {LEASES}?")]);
        assert!(found.sd.lock_file().exists(), "the lock file is held past the phase");
        fake.answer("GET", LEASE_PATH, 200, lease(&mine(), 1));
        <Lock as Phase<Down>>::cleanup(&mut r).await;
        assert_eq!(fake.asked().last().map(String::as_str), Some(&*format!("DELETE {LEASE_PATH}?")));
        assert!(!found.sd.lock_file().exists(), "the clean-up released the lock file");
    }

    /// A record under the lock: loaded into the runner's journal, and the removal it asks for is
    /// the recorded layer's.
    #[tokio::test]
    async fn a_record_found_under_the_lock_is_loaded_and_decides_the_removal() {
        let (root, fake) = (tempfile::tempdir().unwrap(), Fake::recorded("k3d-gpu-desktop"));
        let mut state = State::sample("2026-01-01T00:00:00Z");
        state.layer = "inference".into();
        let (done, mut r, found) = locked(&fake, root.path(), Some(&state)).await;
        let Ok(Some(removal)) = done else { panic!("a removal") };
        assert!(removal.layer == "inference" && removal.earlier.is_empty() && matches!(removal.how, How::Guarded));
        let loaded = r.record_mut().as_ref().expect("the record loaded");
        assert_eq!((loaded.state.layer.as_str(), &loaded.file), ("inference", &found.sd.state_file()));
        <Lock as Phase<Down>>::cleanup(&mut r).await;
    }

    /// Another host's run holding the Lease (renewed 5 s ago) stops the `down` (exit 1, as it
    /// stops `eas up`), naming the holder, without writing the Lease; the lock file taken first
    /// is let go.
    #[tokio::test]
    async fn a_lease_another_live_run_holds_refuses_and_lets_the_lock_file_go() {
        let (root, fake) = (tempfile::tempdir().unwrap(), Fake::recorded("k3d-gpu-desktop"));
        fake.answer("GET", LEASE_PATH, 200, lease("other-host/4242/4242-17", 5));
        let (done, _r, found) = locked(&fake, root.path(), None).await;
        let Err(e) = done else { panic!("refused") };
        assert_eq!(e.exit_code(), 1, "{e}");
        assert!(e.to_string().contains("other-host/4242/4242-17"), "{e}");
        assert_eq!(fake.asked(), [format!("GET {LEASE_PATH}")], "the Lease is only read");
        assert!(!found.sd.lock_file().exists(), "the refused down holds no lock file");
    }
}
