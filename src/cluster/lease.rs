//! One run per cluster, whatever the state directory or host (SPEC §4): besides the local lock,
//! a real run holds the `coordination.k8s.io/v1` Lease `kube-system/eas-run-lock`, its
//! `holderIdentity` the run's host, pid and run id, renewed while the run lives and deleted when
//! it ends. A Lease not renewed within its duration is stale (its run died: a SIGKILL, a lost
//! host) and is taken over only with `--break-lock`. The plan half reads it (a live Lease of
//! another run, or a stale one, is a blocker); the act half takes it and records it in the
//! ledger as eas's own object (`state::ledger::Own`, with its uid and holder), so `eas down`
//! can remove the one a killed run left, and never a Lease that is not that object.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::api::{ApiError, said};
use crate::state::ledger::Own;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "eas-run-lock";
/// How long a Lease lives unrenewed; the run renews it three times as often.
pub const DURATION: Duration = Duration::from_secs(60);
const RENEW: Duration = Duration::from_secs(20);

/// The Lease as a run finds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Free,
    /// Renewed within its duration by `holder`.
    Live {
        holder: String,
        age_secs: i64,
    },
    /// Not renewed for longer than its duration: its run is gone.
    Stale {
        holder: String,
        age_secs: i64,
    },
    /// Another run created or took it between this run's read and its write.
    Raced,
}

/// Judges a Lease read at `now`: live, stale, or (no holder) free.
pub fn judge(lease: Option<&Lease>, now: chrono::DateTime<chrono::Utc>) -> Found {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else { return Found::Free };
    let Some(holder) = spec.holder_identity.clone().filter(|h| !h.is_empty()) else { return Found::Free };
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| t.0);
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(DURATION.as_secs() as i32));
    let age_secs = renewed.map_or(i64::MAX, |t| (now.timestamp() - t.as_second()).max(0));
    if age_secs > duration { Found::Stale { holder, age_secs } } else { Found::Live { holder, age_secs } }
}

/// A live Lease whose holder ran on this host and is gone (its pid is not running, or runs
/// another process: the run id is the pid and its start time) is stale at once: a killed run's
/// Lease need not be waited out.
pub fn on_this_host(found: Found) -> Found {
    let Found::Live { holder, age_secs } = found else { return found };
    let mut parts = holder.splitn(3, '/');
    let (host, pid, run) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok()), parts.next());
    let here = host == Some(crate::state::lock::hostname().as_str());
    let gone = pid.is_some_and(|pid| {
        let start = crate::state::lock::start_time(pid);
        start.is_none() || run.is_some_and(|r| r != format!("{pid}-{}", start.unwrap_or(0)))
    });
    if here && gone { Found::Stale { holder, age_secs } } else { Found::Live { holder, age_secs } }
}

/// Whether a run may take the Lease as it found it: free, or stale with `--break-lock`.
pub fn may_take(found: &Found, break_lock: bool) -> bool {
    matches!(found, Found::Free) || (matches!(found, Found::Stale { .. }) && break_lock)
}

fn api(client: &Client) -> Api<Lease> {
    Api::namespaced(client.clone(), NAMESPACE)
}

/// Reads the Lease (a dry run and doctor send only this GET).
pub async fn read(client: &Client, t: Duration) -> Result<Found, ApiError> {
    let got = tokio::time::timeout(t, api(client).get_opt(NAME)).await;
    let call = format!("get lease {NAMESPACE}/{NAME}");
    let lease = match got {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return Err(ApiError::Call { call, cause: said(&e) }),
        Err(_) => return Err(ApiError::NoAnswer { call, secs: t.as_secs() }),
    };
    Ok(on_this_host(judge(lease.as_ref(), chrono::Utc::now())))
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn lease_for(identity: &str, resource_version: Option<String>) -> Lease {
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
            lease_duration_seconds: Some(DURATION.as_secs() as i32),
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
}

/// What taking the Lease came to: held, or found as another run's (with [`Found::Raced`] when
/// another run created or took it between the read and the write).
pub enum Taken {
    Held(Held),
    Refused(Found),
}

/// Takes the Lease for `identity`: creates it, or takes over a stale one with `break_lock`
/// (replacing it at the version read, so two runs cannot both take it over).
pub async fn acquire(client: &Client, identity: &str, break_lock: bool, t: Duration) -> Result<Taken, ApiError> {
    let leases = api(client);
    let get = format!("get lease {NAMESPACE}/{NAME}");
    let current = tokio::time::timeout(t, leases.get_opt(NAME))
        .await
        .map_err(|_| ApiError::NoAnswer { call: get.clone(), secs: t.as_secs() })?
        .map_err(|e| ApiError::Call { call: get.clone(), cause: said(&e) })?;
    let found = on_this_host(judge(current.as_ref(), chrono::Utc::now()));
    if !may_take(&found, break_lock) {
        return Ok(Taken::Refused(found));
    }
    let taken = match current {
        None => tokio::time::timeout(t, leases.create(&PostParams::default(), &lease_for(identity, None))).await,
        Some(old) => {
            let rv = old.metadata.resource_version.clone();
            tokio::time::timeout(t, leases.replace(NAME, &PostParams::default(), &lease_for(identity, rv))).await
        }
    };
    let uid = match taken {
        Ok(Ok(l)) => l.metadata.uid,
        // Another run created or took it between the read and the write.
        Ok(Err(kube::Error::Api(e))) if e.code == 409 => return Ok(Taken::Refused(Found::Raced)),
        Ok(Err(e)) => return Err(ApiError::Call { call: format!("take lease {NAMESPACE}/{NAME}"), cause: said(&e) }),
        Err(_) => return Err(ApiError::NoAnswer { call: format!("take lease {NAMESPACE}/{NAME}"), secs: t.as_secs() }),
    };
    let (c, id) = (client.clone(), identity.to_string());
    let renewer = tokio::spawn(async move {
        loop {
            tokio::time::sleep(RENEW).await;
            let leases = api(&c);
            let Ok(Ok(Some(mut l))) = tokio::time::timeout(RENEW, leases.get_opt(NAME)).await else { continue };
            if l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(id.as_str()) {
                return;
            }
            if let Some(s) = l.spec.as_mut() {
                s.renew_time = Some(now_micro());
            }
            let _ = tokio::time::timeout(RENEW, leases.replace(NAME, &PostParams::default(), &l)).await;
        }
    });
    Ok(Taken::Held(Held { client: client.clone(), identity: identity.to_string(), uid, renewer }))
}

impl Held {
    /// The Lease as the ledger records it: eas's own object (none when the server gave no uid:
    /// without one, no later `down` could tell it from another object of the name).
    pub fn own(&self) -> Vec<Own> {
        self.uid
            .iter()
            .map(|uid| Own {
                kind: "Lease".into(),
                namespace: NAMESPACE.into(),
                name: NAME.into(),
                uid: uid.clone(),
                holder: self.identity.clone(),
            })
            .collect()
    }

    /// Stops renewing and deletes the Lease if this run still holds it (bounded; a Lease left
    /// behind goes stale within its duration).
    pub async fn release(self, t: Duration) {
        self.renewer.abort();
        let leases = api(&self.client);
        if let Ok(Ok(Some(l))) = tokio::time::timeout(t, leases.get_opt(NAME)).await
            && l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(self.identity.as_str())
        {
            let _ = tokio::time::timeout(t, leases.delete(NAME, &DeleteParams::default())).await;
        }
    }
}

/// What `eas down` finds where the ledger recorded eas's Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum Leftover {
    /// No such Lease: its run released it.
    Gone,
    /// A Lease of that name that is not the one recorded (another uid or holder): not eas's.
    NotOurs,
    /// The recorded Lease, renewed by a run that is alive: left to it.
    Live,
    /// The recorded Lease, its run gone (a SIGKILL, a lost host): eas's leftover.
    Stale,
}

/// Judges the Lease found at `now` against the one the ledger recorded. Pure.
pub fn leftover(recorded: &Own, current: Option<&Lease>, now: chrono::DateTime<chrono::Utc>) -> Leftover {
    let Some(l) = current else { return Leftover::Gone };
    let holder = l.spec.as_ref().and_then(|s| s.holder_identity.as_deref());
    if l.metadata.uid.as_deref() != Some(recorded.uid.as_str()) || holder != Some(recorded.holder.as_str()) {
        return Leftover::NotOurs;
    }
    match on_this_host(judge(Some(l), now)) {
        Found::Stale { .. } => Leftover::Stale,
        Found::Live { .. } | Found::Free | Found::Raced => Leftover::Live,
    }
}

/// `eas down`: removes the run Lease the ledger records when it is still that object and its run
/// is gone, deleting at its uid and version so nothing else of the name can be deleted. Returns
/// the line to show, if any. Bounded by `t`; never an error (a Lease left goes stale anyway).
pub async fn remove_leftover(client: &Client, own: &[Own], t: Duration) -> Option<String> {
    let recorded = own.iter().find(|o| o.kind == "Lease" && o.namespace == NAMESPACE && o.name == NAME)?;
    let leases = api(client);
    let current = tokio::time::timeout(t, leases.get_opt(NAME)).await.ok()?.ok()?;
    let what = format!("eas's run Lease {NAMESPACE}/{NAME}");
    match leftover(recorded, current.as_ref(), chrono::Utc::now()) {
        Leftover::Gone => None,
        Leftover::NotOurs => Some(format!("keeping the Lease {NAMESPACE}/{NAME}: it is not the one eas's run created")),
        Leftover::Live => Some(format!("keeping {what}: its run ({}) is alive", recorded.holder)),
        Leftover::Stale => {
            let rv = current.and_then(|l| l.metadata.resource_version);
            let dp = DeleteParams {
                preconditions: Some(kube::api::Preconditions { uid: Some(recorded.uid.clone()), resource_version: rv }),
                ..DeleteParams::default()
            };
            match tokio::time::timeout(t, leases.delete(NAME, &dp)).await {
                Ok(Ok(_)) => Some(format!("removed {what}, left by a run that is gone ({})", recorded.holder)),
                Ok(Err(e)) => Some(format!("could not remove {what}: {}", crate::cluster::said(&e))),
                Err(_) => Some(format!("could not remove {what}: no answer within {} s", t.as_secs())),
            }
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

    #[test]
    fn a_lease_renewed_within_its_duration_is_live_and_after_it_stale() {
        let now = chrono::Utc::now();
        assert_eq!(judge(None, now), Found::Free);
        assert!(matches!(judge(Some(&lease("h/1/r", 5)), now), Found::Live { .. }));
        assert!(matches!(judge(Some(&lease("h/1/r", 120)), now), Found::Stale { .. }));
        assert!(matches!(judge(Some(&lease("", 5)), now), Found::Free), "no holder: released");
    }

    #[test]
    fn a_live_lease_of_a_dead_run_on_this_host_is_stale() {
        let host = crate::state::lock::hostname();
        let me = std::process::id();
        let mine = format!("{host}/{me}/{me}-{}", crate::state::lock::start_time(me).unwrap_or(0));
        let live = |h: &str| Found::Live { holder: h.to_string(), age_secs: 1 };
        assert!(matches!(on_this_host(live(&mine)), Found::Live { .. }), "this process is alive");
        let reused = format!("{host}/{me}/{me}-1");
        assert!(matches!(on_this_host(live(&reused)), Found::Stale { .. }), "the pid runs another process");
        assert!(matches!(on_this_host(live(&format!("{host}/4194303/x"))), Found::Stale { .. }), "no such pid");
        assert!(matches!(on_this_host(live("elsewhere/1/1-1")), Found::Live { .. }), "another host: not judged here");
    }

    #[test]
    fn down_removes_only_the_recorded_lease_and_only_once_its_run_is_gone() {
        let now = chrono::Utc::now();
        let recorded = Own {
            kind: "Lease".into(),
            namespace: NAMESPACE.into(),
            name: NAME.into(),
            uid: "u-1".into(),
            holder: "elsewhere/9/9-1".into(),
        };
        let with_uid = |mut l: Lease, uid: &str| {
            l.metadata.uid = Some(uid.into());
            l
        };
        assert_eq!(leftover(&recorded, None, now), Leftover::Gone);
        let stale = with_uid(lease("elsewhere/9/9-1", 300), "u-1");
        assert_eq!(leftover(&recorded, Some(&stale), now), Leftover::Stale);
        assert_eq!(leftover(&recorded, Some(&with_uid(lease("elsewhere/9/9-1", 5), "u-1")), now), Leftover::Live);
        // The same name, re-created (another uid) or held by someone else: never eas's.
        assert_eq!(leftover(&recorded, Some(&with_uid(lease("elsewhere/9/9-1", 300), "u-2")), now), Leftover::NotOurs);
        assert_eq!(leftover(&recorded, Some(&with_uid(lease("user", 300), "u-1")), now), Leftover::NotOurs);
        // A run of this host that is gone: its Lease is stale at once.
        let host = crate::state::lock::hostname();
        let dead = Own { holder: format!("{host}/4194303/x"), ..recorded.clone() };
        assert_eq!(leftover(&dead, Some(&with_uid(lease(&dead.holder, 1), "u-1")), now), Leftover::Stale);
    }

    #[test]
    fn only_a_free_lease_or_a_stale_one_with_break_lock_may_be_taken() {
        let live = Found::Live { holder: "h/1/r".into(), age_secs: 3 };
        let stale = Found::Stale { holder: "h/1/r".into(), age_secs: 90 };
        assert!(may_take(&Found::Free, false) && may_take(&stale, true));
        assert!(!may_take(&live, true) && !may_take(&stale, false) && !may_take(&Found::Raced, true));
    }
}
