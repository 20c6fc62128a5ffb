//! The one node reader of every command that reads nodes beyond `eas facts`' streamed gatherer
//! (`status`, `verify`, `doctor`): pages of [`PAGE_LIMIT`] followed by their `continue` tokens,
//! as the gatherer's [`Reader::list`](super::Reader::list) reads them. A real API server answers
//! 5,201 nodes in one unpaged request with one 17 MB body (issue 29); paged, no answer is larger
//! than a supported cluster's 5,000 nodes, and a page that repeats a token is an error, not a
//! loop.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ListParams, ObjectList};

use super::{ApiError, Cluster, MAX_PAGES, PAGE_LIMIT, call};

/// The call's name in errors and the API log.
pub const CALL: &str = "list nodes";

/// Every item of a list read page by page: `page` asks for one page with the given params.
async fn paged<T, F, Fut>(t: Duration, mut page: F) -> Result<Vec<T>, ApiError>
where
    T: Clone,
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = Result<ObjectList<T>, kube::Error>>,
{
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    let mut token: Option<String> = None;
    for n in 1..=MAX_PAGES {
        let mut lp = ListParams::default().limit(PAGE_LIMIT);
        lp.continue_token = token.take();
        let list = call(CALL, t, page(lp)).await?;
        items.extend(list.items);
        let endless = |cause: String| ApiError::Endless { call: CALL.into(), cause };
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            None => return Ok(items),
            Some(c) if !seen.insert(c.clone()) => {
                return Err(endless(format!("page {n} repeats an earlier continue token")));
            }
            Some(c) => token = Some(c),
        }
    }
    Err(ApiError::Endless { call: CALL.into(), cause: format!("still a continue token after {MAX_PAGES} pages") })
}

impl Cluster {
    /// Every node, each page within `t`.
    pub async fn nodes(&self, t: Duration) -> Result<Vec<Node>, ApiError> {
        let client = &self.client;
        let api: Api<Node> = Api::all(client.clone());
        paged(t, |lp| {
            let api = api.clone();
            async move { api.list(&lp).await }
        })
        .await
    }

    /// Every node's metadata (names, labels, annotations), each page within `t`.
    pub async fn node_metadata(&self, t: Duration) -> Result<Vec<ObjectMeta>, ApiError> {
        let client = &self.client;
        let api: Api<Node> = Api::all(client.clone());
        let items = paged(t, |lp| {
            let api = api.clone();
            async move { api.list_metadata(&lp).await }
        })
        .await?;
        Ok(items.into_iter().map(|n| n.metadata).collect())
    }
}
