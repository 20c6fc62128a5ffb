//! `-v` shows every API call eas makes, `-vv` with its status and time (SPEC §1, `-v/-q`): a
//! layer on the kube client's stack, so every call site is covered without each one logging.
//! Only the method and the path with its query are logged; credentials travel in headers, never
//! here.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};

/// A client service whose calls are logged; the layer is `tower::layer::layer_fn(logged)`.
#[derive(Clone, Debug)]
pub struct Logged<S> {
    inner: S,
}

pub fn logged<S>(inner: S) -> Logged<S> {
    Logged { inner }
}

/// The line `-v` prints for a call. Pure.
pub fn request_line(method: &http::Method, uri: &http::Uri) -> String {
    let path = uri.path_and_query().map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    format!("api {method} {path}")
}

impl<S, B, R> tower::Service<Request<B>> for Logged<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let line = request_line(req.method(), req.uri());
        // -vv: the timing goes on the line that reports the answer; -v: the call only.
        let timed = tracing::enabled!(tracing::Level::TRACE);
        if !timed {
            tracing::debug!("{line}");
        }
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            if timed {
                let ms = started.elapsed().as_millis();
                match &res {
                    Ok(r) => tracing::trace!("{line}: {} in {ms} ms", r.status().as_u16()),
                    Err(e) => tracing::trace!("{line}: failed in {ms} ms: {e}"),
                }
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_logged_by_method_path_and_query_only() {
        let uri: http::Uri = "https://user:secret@127.0.0.1:6443/api/v1/pods?labelSelector=a%3Db".parse().unwrap();
        assert_eq!(request_line(&http::Method::GET, &uri), "api GET /api/v1/pods?labelSelector=a%3Db");
    }
}
