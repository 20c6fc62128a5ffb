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
        let (sd, cluster) = (&self.found.sd, &self.found.target.cluster);
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
