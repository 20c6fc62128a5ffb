//! How eas reaches the network: the proxy decision (curl's rules) and the API client's settings.

pub mod api_log;
pub mod download;
pub mod exec_auth;
pub mod kube_config;
pub mod proxy;
pub mod trust;
