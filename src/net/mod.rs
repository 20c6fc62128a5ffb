//! How eas reaches the network: the proxy decision (curl's rules) and the API client's settings.

pub mod api_log;
pub mod body_limit;
pub mod download;
pub mod exec_auth;
// Not called by the config phase yet (issue 20 item 2): see config::hf.
#[allow(dead_code)]
pub mod kube_config;
pub mod proxy;
pub mod trust;
