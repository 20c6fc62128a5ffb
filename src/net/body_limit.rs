//! Every answer the API client reads has a size limit (issue 23, "every read has a size limit"):
//! a layer on kube's own client stack caps each response body, so kube's `Api` get and list
//! calls, which read an answer whole before parsing it, fail past the limit instead of growing
//! memory with whatever the server sends. The gatherer's streamed list pages mark their requests
//! [`Streamed`] and get the larger page limit (they are parsed as they arrive and capped again
//! there, `cluster::MAX_PAGE_BYTES`).
//!
//! | answer | limit | why |
//! |---|---|---|
//! | read whole (`Api` get and list, logs, discovery) | 256 MiB | the largest unpaged list eas makes (every node of a 5000-node cluster) is well under it; one object is at most a few MiB |
//! | a streamed list page | 1 GiB | `cluster::MAX_PAGE_BYTES` |

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};

/// The limit of an answer read whole.
pub const WHOLE: u64 = 256 * 1024 * 1024;
/// A streamed list page (`cluster::MAX_PAGE_BYTES` is this): the gatherer parses pages as
/// they arrive and caps them again there.
pub const PAGE: u64 = 1 << 30;

/// Marks a request whose answer is parsed as a stream (the gatherer's list pages).
#[derive(Clone, Copy, Debug)]
pub struct Streamed;

/// A client service whose answers are capped; the layer is `tower::layer::layer_fn(limited)`.
#[derive(Clone, Debug)]
pub struct Limited<S> {
    inner: S,
}

pub fn limited<S>(inner: S) -> Limited<S> {
    Limited { inner }
}

/// The error a body past its limit ends with; kube reports it as the call's error.
#[derive(Debug, thiserror::Error)]
#[error("the API server's answer is larger than its limit of {}", crate::bounded::shown(*.0))]
pub struct TooLarge(pub u64);

impl<S, B, R> tower::Service<Request<B>> for Limited<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    R: Body<Data = Bytes> + Send + 'static,
{
    type Response = Response<Capped<R>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let limit = if req.extensions().get::<Streamed>().is_some() { PAGE } else { WHOLE };
        let fut = self.inner.call(req);
        Box::pin(async move { Ok(fut.await?.map(|b| Capped { inner: Box::pin(b), left: limit, limit })) })
    }
}

/// A body that fails with [`TooLarge`] once more than its limit has come.
pub struct Capped<R> {
    inner: Pin<Box<R>>,
    left: u64,
    limit: u64,
}

impl<R> Body for Capped<R>
where
    R: Body<Data = Bytes>,
    R::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let n = data.len() as u64;
                    if n > self.left {
                        self.left = 0;
                        return Poll::Ready(Some(Err(Box::new(TooLarge(self.limit)))));
                    }
                    self.left -= n;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn capped(body: &'static [u8], limit: u64) -> Capped<http_body_util::Full<Bytes>> {
        Capped { inner: Box::pin(http_body_util::Full::new(Bytes::from_static(body))), left: limit, limit }
    }

    #[tokio::test]
    async fn a_body_past_its_limit_fails_naming_the_limit_and_one_within_it_is_whole() {
        assert_eq!(capped(b"0123456789", 10).collect().await.unwrap().to_bytes(), &b"0123456789"[..]);
        let e = capped(b"0123456789", 9).collect().await.unwrap_err().to_string();
        assert_eq!(e, "the API server's answer is larger than its limit of 9 bytes");
        assert_eq!(TooLarge(WHOLE).to_string(), "the API server's answer is larger than its limit of 256 MiB");
    }
}
