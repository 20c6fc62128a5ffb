//! One run per cluster, whatever the state directory or host (SPEC §4): besides the local lock,
//! a real run holds the `coordination.k8s.io/v1` Lease `kube-system/eas-run-lock`, its
//! `holderIdentity` the run's host, pid and run id, renewed while the run lives and deleted when
//! it ends. `eas up` and `eas down` take it alike. A holder of this host is judged by its process
//! (alive: live whatever the Lease's age, its renewals failing; gone: stale at once); another
//! host's by time (stale only once expired for longer than its duration). A stale one is taken
//! over only with `--break-lock`. The plan half reads it (another run's, or a stale one, is a
//! blocker); the act half takes it and records it in the ledger as eas's own object (its uid
//! and holder). What the holder identity says (encoded and parsed) and whether a holder of this
//! host is alive are the lock phase's (`pipeline::phases::lock`): this module is handed the
//! judgement of a holder ([`Here`]). The Lease fences the holder: a renewal that
//! finds it gone or taken, or cannot renew it before it expires, trips the holder's [`Fence`],
//! which stops its installer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::Cluster;
use super::api::{ApiError, said};
use super::objects::call;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "eas-run-lock";
/// How long a Lease lives unrenewed; the run renews it three times as often.
pub const DURATION: Duration = Duration::from_secs(60);

/// The duration this run writes: `EAS_LEASE_SECS` (at least 3; tests shorten it so a lost Lease
/// is noticed within seconds), else [`DURATION`].
pub fn duration_from(setting: Option<String>) -> Duration {
    setting.and_then(|v| v.trim().parse::<u64>().ok()).map_or(DURATION, |s| Duration::from_secs(s.max(3)))
}

/// Whether a holder identity ran on this host, and if so its pid and whether that process is
/// alive (the lock phase's judgement: `pipeline::phases::lock::holder_here`).
pub type Here<'a> = &'a dyn Fn(&str) -> Option<(u32, bool)>;

/// The Lease as a run finds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Free,
    /// Renewed within its duration by `holder`.
    Live {
        holder: String,
        age_secs: i64,
    },
    /// Held by a run of this host that is alive, not renewed within its duration: live all the
    /// same (its renewals are failing), never taken over.
    Failing {
        holder: String,
        age_secs: i64,
        pid: u32,
    },
    /// Another host's, expired but not yet for longer than its duration: that host's run may
    /// still be acting, so it is not taken over, even with `--break-lock`, for `wait_secs` more.
    Expired {
        holder: String,
        age_secs: i64,
        wait_secs: i64,
    },
    /// Its run is gone: a run of this host whose process is not running, or another host's
    /// Lease expired for longer than its duration.
    Stale {
        holder: String,
        age_secs: i64,
    },
    /// Another run created or took it between this run's read and its write.
    Raced,
}

impl Found {
    /// The holder's identity, when there is one.
    pub fn holder(&self) -> Option<&str> {
        match self {
            Found::Live { holder, .. }
            | Found::Failing { holder, .. }
            | Found::Expired { holder, .. }
            | Found::Stale { holder, .. } => Some(holder),
            Found::Free | Found::Raced => None,
        }
    }
}

/// Judges a Lease read at `now`: free (no holder); for a holder of this host (`here`), live or
/// failing while its process is alive, whatever the Lease's age, else stale; for another host's,
/// live within its duration, expired up to twice it, stale after.
pub fn judge(lease: Option<&Lease>, now: chrono::DateTime<chrono::Utc>, here: Here<'_>) -> Found {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else { return Found::Free };
    let Some(holder) = spec.holder_identity.clone().filter(|h| !h.is_empty()) else { return Found::Free };
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| t.0);
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(DURATION.as_secs() as i32)).max(0);
    let age_secs = renewed.map_or(i64::MAX, |t| now.timestamp().saturating_sub(t.as_second()).max(0));
    match here(&holder) {
        Some((_, true)) if age_secs <= duration => Found::Live { holder, age_secs },
        Some((pid, true)) => Found::Failing { holder, age_secs, pid },
        Some((_, false)) => Found::Stale { holder, age_secs },
        None if age_secs <= duration => Found::Live { holder, age_secs },
        None if age_secs > duration.saturating_mul(2) => Found::Stale { holder, age_secs },
        None => Found::Expired { holder, age_secs, wait_secs: duration.saturating_mul(2) - age_secs + 1 },
    }
}

/// Whether a run may take the Lease as it found it: free, or stale with `--break-lock`.
pub fn may_take(found: &Found, break_lock: bool) -> bool {
    matches!(found, Found::Free) || (matches!(found, Found::Stale { .. }) && break_lock)
}

/// Why a holder lost the right to act: its Lease gone, taken, or not renewable. Tripped by the
/// renewer; whoever acts under the Lease (the installer's run) watches it.
#[derive(Debug, Clone, Default)]
pub struct Fence {
    token: CancellationToken,
    why: Arc<Mutex<Option<String>>>,
}

impl Fence {
    fn lose(&self, why: String) {
        if let Ok(mut w) = self.why.lock()
            && w.is_none()
        {
            *w = Some(why);
        }
        self.token.cancel();
    }

    /// `lost the cluster lock: <gone | taken by X | not renewable since T>`, once lost.
    pub fn lost(&self) -> Option<String> {
        if !self.token.is_cancelled() {
            return None;
        }
        let why = self.why.lock().ok().and_then(|w| w.clone()).unwrap_or_default();
        Some(format!("lost the cluster lock: {why}"))
    }

    /// Resolves once the Lease is lost.
    pub async fn tripped(&self) {
        self.token.cancelled().await
    }
}

fn api(client: &Client) -> Api<Lease> {
    Api::namespaced(client.clone(), NAMESPACE)
}

impl Cluster {
    /// Reads the Lease (a dry run and doctor send only this GET).
    pub async fn lease(&self, t: Duration, here: Here<'_>) -> Result<Found, ApiError> {
        let client = &self.client;
        let lease = get(&api(client), t).await?;
        Ok(judge(lease.as_ref(), chrono::Utc::now(), here))
    }

    /// Takes the Lease for `identity`, written with `duration`: creates it, or takes over a stale
    /// one with `break_lock` (replacing it at the version read, so two runs cannot both take it over;
    /// the API server keeps its uid). The holder's renewer starts at once.
    pub async fn take_lease(
        &self,
        identity: &str,
        (break_lock, here): (bool, Here<'_>),
        t: Duration,
        duration: Duration,
    ) -> Result<Taken, ApiError> {
        let client = &self.client;
        let leases = api(client);
        let current = get(&leases, t).await?;
        let found = judge(current.as_ref(), chrono::Utc::now(), here);
        if !may_take(&found, break_lock) {
            return Ok(Taken::Refused(found));
        }
        let taken = match current {
            None => {
                tokio::time::timeout(t, leases.create(&PostParams::default(), &lease_for(identity, None, duration)))
                    .await
            }
            Some(old) => {
                let rv = old.metadata.resource_version.clone();
                let new = lease_for(identity, rv, duration);
                tokio::time::timeout(t, leases.replace(NAME, &PostParams::default(), &new)).await
            }
        };
        let uid = match taken {
            Ok(Ok(l)) => l.metadata.uid,
            // Another run created or took it between the read and the write.
            Ok(Err(kube::Error::Api(e))) if e.code == 409 => return Ok(Taken::Refused(Found::Raced)),
            Ok(Err(e)) => {
                return Err(ApiError::Call { call: format!("take lease {NAMESPACE}/{NAME}"), cause: said(&e) });
            }
            Err(_) => {
                return Err(ApiError::NoAnswer { call: format!("take lease {NAMESPACE}/{NAME}"), secs: t.as_secs() });
            }
        };
        let fence = Fence::default();
        let renewer = tokio::spawn(renew(client.clone(), identity.to_string(), duration, fence.clone()));
        Ok(Taken::Held(Held { client: client.clone(), identity: identity.to_string(), uid, renewer, fence }))
    }
}

async fn get(leases: &Api<Lease>, t: Duration) -> Result<Option<Lease>, ApiError> {
    call(&format!("get lease {NAMESPACE}/{NAME}"), t, leases.get_opt(NAME)).await
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn lease_for(identity: &str, resource_version: Option<String>, duration: Duration) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NAMESPACE.into()),
            resource_version,
            labels: Some([("io.eas.managed".to_string(), "true".to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(identity.into()),
            lease_duration_seconds: Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)),
            acquire_time: Some(now_micro()),
            renew_time: Some(now_micro()),
            ..LeaseSpec::default()
        }),
    }
}

/// The Lease held by this run: renewed in the background until [`Held::release`].
pub struct Held {
    client: Client,
    identity: String,
    /// The uid the API server gave the Lease this run wrote.
    uid: Option<String>,
    renewer: tokio::task::JoinHandle<()>,
    fence: Fence,
}

/// What taking the Lease came to: held, or found as another run's (with [`Found::Raced`] when
/// another run created or took it between the read and the write).
pub enum Taken {
    Held(Held),
    Refused(Found),
}

/// The holder's renewer: every third of the duration it re-reads the Lease and renews it. Found
/// gone or held by another identity, or not renewed for two thirds of its duration (the last
/// third is the margin in which the installer is stopped before the Lease expires), it trips the
/// fence and ends. A failed renewal is retried every twelfth of the duration.
async fn renew(client: Client, id: String, duration: Duration, fence: Fence) {
    let every = duration / 3;
    let retry = (duration / 12).max(Duration::from_millis(250));
    let leases = api(&client);
    let mut last_ok = tokio::time::Instant::now();
    let mut failing_since: Option<String> = None;
    let mut wait = every;
    loop {
        tokio::time::sleep(wait).await;
        let got = tokio::time::timeout(every, leases.get_opt(NAME)).await;
        let renewed = match got {
            Ok(Ok(None)) => return fence.lose("gone".into()),
            Ok(Ok(Some(l))) => {
                let holder = l.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default();
                if holder != id {
                    let by = if holder.is_empty() { "nobody (released)".to_string() } else { holder };
                    return fence.lose(format!("taken by {by}"));
                }
                let mut l = l;
                if let Some(s) = l.spec.as_mut() {
                    s.renew_time = Some(now_micro());
                }
                matches!(tokio::time::timeout(every, leases.replace(NAME, &PostParams::default(), &l)).await, Ok(Ok(_)))
            }
            _ => false,
        };
        if renewed {
            last_ok = tokio::time::Instant::now();
            failing_since = None;
            wait = every;
            continue;
        }
        let since =
            failing_since.get_or_insert_with(|| chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()).clone();
        if last_ok.elapsed() + retry >= duration - every {
            return fence.lose(format!("not renewable since {since}"));
        }
        wait = retry;
    }
}

impl Held {
    /// The fence this holder acts under.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The uid the API server gave the Lease this run wrote (none: no later `down` could tell
    /// it from another object of the name), and the identity it holds it as.
    pub fn written(&self) -> (Option<&str>, &str) {
        (self.uid.as_deref(), &self.identity)
    }

    /// Stops renewing and deletes the Lease if this run still holds it (bounded; a Lease left
    /// behind goes stale within its duration).
    pub async fn release(self, t: Duration) {
        self.renewer.abort();
        let leases = api(&self.client);
        if let Ok(Some(l)) = get(&leases, t).await
            && l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(self.identity.as_str())
        {
            let params = DeleteParams::default();
            let _ = call(&format!("delete lease {NAMESPACE}/{NAME}"), t, leases.delete(NAME, &params)).await;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed_secs_ago: i64) -> Lease {
        let now = k8s_openapi::jiff::Timestamp::now();
        let t = now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(renewed_secs_ago)).unwrap();
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(60),
                renew_time: Some(MicroTime(t)),
                ..LeaseSpec::default()
            }),
        }
    }

    /// A judgement of holders: "here/<pid>/…" ran on this host, alive when its pid is 1.
    fn here(holder: &str) -> Option<(u32, bool)> {
        let pid = holder.strip_prefix("here/")?.split('/').next()?.parse::<u32>().ok()?;
        Some((pid, pid == 1))
    }

    #[test]
    fn another_hosts_lease_is_live_within_its_duration_and_stale_only_past_twice_it() {
        let now = chrono::Utc::now();
        assert_eq!(judge(None, now, &here), Found::Free);
        assert!(matches!(judge(Some(&lease("h/1/r", 5)), now, &here), Found::Live { .. }));
        // Expired, not yet for longer than its duration: that host's run may still act.
        assert!(matches!(judge(Some(&lease("h/1/r", 90)), now, &here), Found::Expired { wait_secs: 31, .. }));
        assert!(matches!(judge(Some(&lease("h/1/r", 121)), now, &here), Found::Stale { .. }));
        assert!(matches!(judge(Some(&lease("", 5)), now, &here), Found::Free), "no holder: released");
        assert!(may_take(&judge(Some(&lease("h/1/r", 121)), now, &here), true));
        assert!(!may_take(&judge(Some(&lease("h/1/r", 90)), now, &here), true), "expired is not stale");
    }

    #[test]
    fn a_live_holder_of_this_host_is_live_whatever_its_age_and_a_dead_one_is_stale_at_once() {
        let now = chrono::Utc::now();
        assert!(matches!(judge(Some(&lease("here/1/r", 1)), now, &here), Found::Live { .. }), "alive");
        // Renewals failing for far longer than its duration: still live, never taken over.
        let failing = judge(Some(&lease("here/1/r", 3600)), now, &here);
        assert!(matches!(failing, Found::Failing { pid: 1, .. }), "{failing:?}");
        assert!(!may_take(&failing, true));
        assert!(matches!(judge(Some(&lease("here/2/r", 1)), now, &here), Found::Stale { .. }), "its process is gone");
    }

    #[test]
    fn only_a_free_lease_or_a_stale_one_with_break_lock_may_be_taken() {
        let live = Found::Live { holder: "h/1/r".into(), age_secs: 3 };
        let stale = Found::Stale { holder: "h/1/r".into(), age_secs: 90 };
        assert!(may_take(&Found::Free, false) && may_take(&stale, true));
        assert!(!may_take(&live, true) && !may_take(&stale, false) && !may_take(&Found::Raced, true));
    }

    #[test]
    fn the_lease_duration_setting_has_a_floor() {
        assert_eq!(duration_from(None), DURATION);
        assert_eq!(duration_from(Some("6".into())), Duration::from_secs(6));
        assert_eq!(duration_from(Some("0".into())), Duration::from_secs(3));
        assert_eq!(duration_from(Some("x".into())), DURATION);
    }
}
