//! The recorded-cluster server itself (tests/support/cluster_server.rs): selectors, paging
//! tokens, and writes stored and served back, as the end-to-end tests will rely on.

mod support;

use std::io::{Read, Write};

use serde_json::{Value, json};
use support::cluster_server::{
    FieldSelector, LabelSelector, decode_continue, encode_continue, parse_query, percent_decode, resource_by_plural,
};
use support::*;

#[test]
fn selectors() {
    let obj = json!({"metadata": {"name": "a", "labels": {"app": "x", "tier": "db"}}, "type": "helm.sh/release.v1"});
    let yes = ["app=x", "app==x", "app!=y", "app in (x,y)", "tier notin (web)", "app", "!missing", "app=x,tier=db"];
    for s in yes {
        assert!(LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
    }
    let no = ["app=y", "app!=x", "app in (y)", "tier notin (db)", "missing", "!app", "app=x,tier=web"];
    for s in no {
        assert!(!LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
    }
    let secrets = resource_by_plural("v1", "secrets").unwrap();
    assert!(FieldSelector::parse("type=helm.sh/release.v1", secrets).unwrap().matches(&obj));
    assert!(!FieldSelector::parse("type!=helm.sh/release.v1", secrets).unwrap().matches(&obj));
    assert!(FieldSelector::parse("metadata.name=a", secrets).unwrap().matches(&obj));
    assert!(
        FieldSelector::parse("spec.nodeName=x", secrets).is_err(),
        "like the API server, unindexed fields are refused"
    );
}

#[test]
fn queries_and_tokens() {
    let q = parse_query("fieldSelector=type%3Dhelm.sh%2Frelease.v1&limit=500&labelSelector=a+in+%28b%29");
    assert_eq!(q["fieldSelector"], "type=helm.sh/release.v1");
    assert_eq!(q["labelSelector"], "a in (b)");
    assert_eq!(q["limit"], "500");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(decode_continue(&encode_continue(4000)), Some(4000));
    assert_eq!(decode_continue("garbage!"), None);
}

/// One HTTP/1.1 exchange with the server, as any client would make it.
fn http(server: &ClusterServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let addr = server.url().trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let content_type = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer recorded-cluster-token\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    let code: u16 = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    let json = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, serde_json::from_str(json).unwrap_or(Value::Null))
}

#[test]
fn writes_are_stored_served_back_and_logged() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-inference"}});
    assert_eq!(http(&server, "POST", "/api/v1/namespaces", Some(&ns)).0, 201);
    assert_eq!(http(&server, "POST", "/api/v1/namespaces", Some(&ns)).0, 409, "a second create conflicts");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}});
    assert_eq!(http(&server, "POST", "/api/v1/namespaces/llm-inference/configmaps", Some(&cm)).0, 201);
    let (code, patched) = http(
        &server,
        "PATCH",
        "/api/v1/namespaces/llm-inference/configmaps/cfg",
        Some(&json!({"data": {"a": null, "b": "2"}})),
    );
    assert_eq!(code, 200);
    assert_eq!(patched["data"], json!({"b": "2"}));
    let (code, got) = http(&server, "GET", "/api/v1/namespaces/llm-inference/configmaps/cfg", None);
    assert_eq!((code, got["data"].clone()), (200, json!({"b": "2"})));
    let key = ObjectKey {
        group_version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "llm-inference".into(),
        name: "cfg".into(),
    };
    assert!(server.object(&key).is_some());
    let (_, list) =
        http(&server, "GET", "/api/v1/namespaces?labelSelector=kubernetes.io%2Fmetadata.name%21%3Dllm-inference", None);
    assert_eq!(list["items"].as_array().unwrap().len(), 5, "the recorded namespaces, not the new one");
    assert_eq!(http(&server, "DELETE", "/api/v1/namespaces/llm-inference/configmaps/cfg", None).0, 200);
    assert_eq!(http(&server, "GET", "/api/v1/namespaces/llm-inference/configmaps/cfg", None).0, 404);
    assert!(server.object(&key).is_none());
    let methods: Vec<String> = server.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, ["POST", "POST", "POST", "PATCH", "GET", "GET", "DELETE", "GET"]);
}

#[test]
fn lists_have_the_api_shape_and_faults_come_and_go() {
    let server = ClusterServer::start(fixture("k3s-3node-eas"));
    let (code, list) = http(&server, "GET", "/api/v1/nodes?limit=2", None);
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "NodeList");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert!(list["items"][0].get("kind").is_none(), "list items carry no kind, as the API sends them");
    assert_eq!(list["metadata"]["remainingItemCount"], 1);
    let token = list["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, rest) = http(&server, "GET", &format!("/api/v1/nodes?limit=2&continue={token}"), None);
    assert_eq!(rest["items"][0]["metadata"]["name"], "lab-w-2");
    assert!(rest["metadata"].get("continue").is_none());

    server.inject(Some("/api/v1/nodes"), Fault::Status(500, "boom".into()), Some(1));
    let (code, status) = http(&server, "GET", "/api/v1/nodes", None);
    assert_eq!((code, status["kind"].as_str(), status["message"].as_str()), (500, Some("Status"), Some("boom")));
    assert_eq!(http(&server, "GET", "/api/v1/nodes", None).0, 200, "the fault was for one request");
}
