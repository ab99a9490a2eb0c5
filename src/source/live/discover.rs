//! Finding every kube-apiserver replica: the `default/kubernetes` EndpointSlices
//! (or, on clusters without them, the `kubernetes` Endpoints) list the address
//! and port of each replica, which cptriage then scrapes directly instead of
//! through the load balancer.

use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;

/// The EndpointSlice query.
pub const ENDPOINTSLICE_PATH: &str =
    "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io/service-name=kubernetes";
/// The Endpoints fallback.
pub const ENDPOINTS_PATH: &str = "/api/v1/namespaces/default/endpoints/kubernetes";

#[derive(Deserialize)]
struct SliceList {
    #[serde(default)]
    items: Vec<Slice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Slice {
    #[serde(default)]
    endpoints: Option<Vec<SliceEndpoint>>,
    #[serde(default)]
    ports: Option<Vec<Port>>,
}

#[derive(Deserialize)]
struct SliceEndpoint {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    conditions: Option<Conditions>,
}

#[derive(Deserialize)]
struct Conditions {
    ready: Option<bool>,
}

#[derive(Deserialize)]
struct Port {
    name: Option<String>,
    port: Option<u16>,
}

#[derive(Deserialize)]
struct Endpoints {
    #[serde(default)]
    subsets: Option<Vec<Subset>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Subset {
    #[serde(default)]
    addresses: Option<Vec<Address>>,
    #[serde(default)]
    not_ready_addresses: Option<Vec<Address>>,
    #[serde(default)]
    ports: Option<Vec<Port>>,
}

#[derive(Deserialize)]
struct Address {
    ip: String,
}

/// One discovered replica.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Replica {
    pub addr: SocketAddr,
    /// Listed as not ready (still scraped: a replica that is not ready is evidence).
    pub not_ready: bool,
}

fn pick_port(ports: &[Port]) -> Option<u16> {
    ports
        .iter()
        .find(|p| p.name.as_deref() == Some("https"))
        .or_else(|| ports.first())
        .and_then(|p| p.port)
}

fn sock(ip: &str, port: u16) -> Option<SocketAddr> {
    ip.parse::<IpAddr>().ok().map(|a| SocketAddr::new(a, port))
}

/// Parses an EndpointSlice list; the replicas sorted, without duplicates.
pub fn parse_slices(body: &[u8]) -> Result<Vec<Replica>, String> {
    let l: SliceList = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not an EndpointSlice list (line {} column {})",
            e.line(),
            e.column()
        )
    })?;
    let mut out = Vec::new();
    for s in l.items {
        let Some(port) = pick_port(s.ports.as_deref().unwrap_or_default()) else {
            continue;
        };
        for ep in s.endpoints.unwrap_or_default() {
            let not_ready = ep.conditions.and_then(|c| c.ready) == Some(false);
            for a in ep.addresses {
                if let Some(addr) = sock(&a, port) {
                    out.push(Replica { addr, not_ready });
                }
            }
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.addr == b.addr);
    Ok(out)
}

/// Parses the `kubernetes` Endpoints object.
pub fn parse_endpoints(body: &[u8]) -> Result<Vec<Replica>, String> {
    let e: Endpoints = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not an Endpoints object (line {} column {})",
            e.line(),
            e.column()
        )
    })?;
    let mut out = Vec::new();
    for s in e.subsets.unwrap_or_default() {
        let Some(port) = pick_port(s.ports.as_deref().unwrap_or_default()) else {
            continue;
        };
        for (list, not_ready) in [(s.addresses, false), (s.not_ready_addresses, true)] {
            for a in list.unwrap_or_default() {
                if let Some(addr) = sock(&a.ip, port) {
                    out.push(Replica { addr, not_ready });
                }
            }
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.addr == b.addr);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_pick_the_https_port_and_keep_not_ready_replicas() {
        let body = br#"{"kind":"EndpointSliceList","items":[
          {"addressType":"IPv4","endpoints":[
             {"addresses":["10.0.0.2"],"conditions":{"ready":true}},
             {"addresses":["10.0.0.1"],"conditions":{"ready":false}},
             {"addresses":["not-an-ip"]}],
           "ports":[{"name":"https","port":6443,"protocol":"TCP"}]},
          {"endpoints":null,"ports":null}]}"#;
        let r = parse_slices(body).unwrap();
        assert_eq!(
            r,
            vec![
                Replica {
                    addr: "10.0.0.1:6443".parse().unwrap(),
                    not_ready: true
                },
                Replica {
                    addr: "10.0.0.2:6443".parse().unwrap(),
                    not_ready: false
                },
            ]
        );
        assert!(parse_slices(b"<html>")
            .unwrap_err()
            .contains("not an EndpointSlice list"));
    }

    #[test]
    fn endpoints_fallback() {
        let body = br#"{"subsets":[{"addresses":[{"ip":"fd00::1"},{"ip":"10.1.1.1"}],"ports":[{"name":"https","port":443}]}]}"#;
        let r = parse_endpoints(body).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r.iter().any(|x| x.addr == "[fd00::1]:443".parse().unwrap()));
    }
}
