//! The facts the cluster's prerequisites are checked on (issue 21), beyond what the node list
//! already carries (conditions, `spec.unschedulable`, allocatable `ephemeral-storage`): the
//! StorageClasses (one list call) and one `SelfSubjectAccessReview` per access the installer
//! needs (`data/prereq.json`), sent at once. A review is a POST that the API server answers and
//! does not store: the only requests eas facts makes that are not reads.

use serde::Deserialize;

use crate::facts::{AccessReview, StorageClass};
use crate::prereq::ReviewSpec;

use super::objects::Meta;
use crate::cluster::access::Access;
use crate::cluster::{ApiError, Call, Reader};

/// The annotation that marks the default StorageClass.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

pub fn storage_classes_call() -> Call {
    Call::list("storageclasses", "storage.k8s.io/v1", None)
}

#[derive(Debug, Deserialize)]
pub struct StorageClassItem {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub provisioner: String,
}

pub fn storage_class(item: StorageClassItem) -> StorageClass {
    let default = item.metadata.annotations.get(DEFAULT_CLASS).is_some_and(|v| v == "true");
    StorageClass { name: item.metadata.name, provisioner: item.provisioner, default }
}

/// Asks every review at once (all namespaces each; `cluster::access`): one call per review.
pub async fn access_reviews(reader: &Reader, specs: &[ReviewSpec]) -> Result<(Vec<AccessReview>, u32), ApiError> {
    let asks: Vec<Access> =
        specs.iter().map(|s| Access { verb: &s.verb, group: &s.group, resource: &s.resource }).collect();
    let answers = crate::cluster::access::review(reader, &asks).await?;
    let reviews: Vec<AccessReview> = specs
        .iter()
        .zip(answers)
        .map(|(s, a)| AccessReview {
            verb: s.verb.clone(),
            group: s.group.clone(),
            resource: s.resource.clone(),
            namespace: None,
            allowed: a.allowed,
            reason: a.reason,
        })
        .collect();
    let calls = reviews.len() as u32;
    Ok((reviews, calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_class_is_the_annotated_one() {
        // k3s's local-path class, as its manifest writes it (k3s-io/k3s@d804db30 manifests/local-storage.yaml).
        let item: StorageClassItem = serde_json::from_str(
            r#"{"metadata":{"name":"local-path","annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},
                "provisioner":"rancher.io/local-path","reclaimPolicy":"Delete","volumeBindingMode":"WaitForFirstConsumer"}"#,
        )
        .unwrap();
        assert_eq!(
            storage_class(item),
            StorageClass { name: "local-path".into(), provisioner: "rancher.io/local-path".into(), default: true }
        );
        let other: StorageClassItem = serde_json::from_str(
            r#"{"metadata":{"name":"nfs","annotations":{"storageclass.kubernetes.io/is-default-class":"false"}},"provisioner":"x"}"#,
        )
        .unwrap();
        assert!(!storage_class(other).default);
    }
}
