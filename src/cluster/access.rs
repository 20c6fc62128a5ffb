//! `SelfSubjectAccessReview`s: whether the kubeconfig's identity may do what the installer needs.
//! A review is a POST the API server answers and does not store.

use futures::future::try_join_all;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

use super::{ApiError, Call, Reader};

/// One access to ask about, in all namespaces.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
}

/// The API server's answer to one review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Allowed, and not denied outright.
    pub allowed: bool,
    pub reason: String,
}

fn review_call() -> Call {
    Call {
        verb: "create",
        resource: "selfsubjectaccessreviews",
        namespace: None,
        path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
        field_selector: None,
    }
}

/// Asks every review at once, each bounded by the reader's timeout; the answers in `asks`' order.
pub async fn review(reader: &Reader, asks: &[Access<'_>]) -> Result<Vec<Answer>, ApiError> {
    let api: Api<SelfSubjectAccessReview> = Api::all(reader.client.clone());
    let call = review_call();
    let each = asks.iter().map(|a| {
        let (api, call) = (api.clone(), call.clone());
        async move {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some(a.verb.to_string()),
                        group: Some(a.group.to_string()),
                        resource: Some(a.resource.to_string()),
                        ..Default::default()
                    }),
                    non_resource_attributes: None,
                },
                ..Default::default()
            };
            let answer = tokio::time::timeout(reader.timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| reader.timed_out(&call))?
                .map_err(|e| reader.classify(&call, e))?;
            let status = answer.status.unwrap_or_default();
            Ok::<_, ApiError>(Answer {
                allowed: status.allowed && status.denied != Some(true),
                reason: status.reason.unwrap_or_default(),
            })
        }
    });
    try_join_all(each).await
}
