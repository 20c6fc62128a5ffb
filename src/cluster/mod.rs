//! Every Kubernetes API call eas makes, with one error type ([`ApiError`]: the call, and why it
//! failed, in words a person can act on): the client for the kubeconfig's context and the
//! bounded, streamed reader of lists ([`api`]: `eas facts`' reads and the gatherer's); the
//! cluster's identity, the ledger's snapshots, the deletions `eas down` makes and the waits for
//! them to go ([`objects`]); the run's Lease ([`lease`]); the access reviews ([`access`]); the
//! pods eas runs itself ([`pods`]); the typed reads and waits of verification and status
//! ([`typed`]). Callers get plain data or an [`ApiError`]; what it means for the run (a blocker,
//! an exit code) is theirs to decide.

pub mod access;
pub mod api;
#[cfg(test)]
pub mod fake;
pub mod forward;
pub mod lease;
pub mod nodes;
pub mod objects;
pub mod pods;
pub mod typed;

pub use api::*;
pub use objects::*;
use std::time::Duration;

/// The cluster a run talks to (after zarf: zarf-dev/zarf `src/pkg/cluster/cluster.go` at 78b87ec,
/// `type Cluster struct` holding the clientset, every call a method on it; its tests build one
/// over client-go's fake clientset, `secrets_test.go` at 0faaec5): its client,
/// and every call eas makes of it as a method (the identity and the ledger's snapshots and
/// deletions in [`objects`], the nodes in [`nodes`], the Lease in [`lease`], the pods eas runs in
/// [`pods`], a port-forward in [`forward`], the typed reads and waits in [`typed`]). Built once
/// per run from the kubeconfig's context ([`target`]) and handed to whatever reads or writes the
/// cluster; a unit test builds one over an in-memory API server ([`fake`]), so the code under
/// test is the code that runs.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
}

impl Cluster {
    pub fn new(client: kube::Client) -> Cluster {
        Cluster { client }
    }

    /// The client itself, for the streamed reader of lists ([`Reader`]).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

/// Every cluster API call's deadline (a list, a get, a delete).
pub const CALL: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_names_its_call_and_says_what_to_do() {
        let call = |c: &str| c.to_string();
        let cases = [
            ApiError::Call { call: call("delete namespace kserve"), cause: "403 Forbidden: no".into() },
            ApiError::NoConnection { call: call(IDENTITY_CALL), cause: "connection refused".into() },
            ApiError::NoAnswer { call: call("list CRDs"), secs: 30 },
            ApiError::Forbidden { call: call("list nodes"), message: "no".into(), rule: String::new() },
        ];
        for (e, named) in cases.iter().zip(["delete namespace kserve", IDENTITY_CALL, "list CRDs", "list nodes"]) {
            assert!(e.to_string().starts_with(named), "{e}");
            assert!(!e.next().is_empty(), "{e:?} has a next step");
        }
        let retried = ApiError::Retried { last: Box::new(cases[2].clone_for_test()), tries: 4, secs: 12 };
        assert_eq!(retried.to_string(), "list CRDs: no answer within 30 s (4 tries in 12 s)");
        assert_eq!(retried.next(), cases[2].next(), "a retried read's next step is its last failure's");
    }

    impl ApiError {
        fn clone_for_test(&self) -> ApiError {
            match self {
                ApiError::NoAnswer { call, secs } => ApiError::NoAnswer { call: call.clone(), secs: *secs },
                _ => unreachable!("only the no-answer case is cloned here"),
            }
        }
    }
}
