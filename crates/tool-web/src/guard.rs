//! The SSRF guard: which addresses `web_fetch` may connect to, checked on the addresses a name
//! resolves to (by the client's own resolver, so every connection of every redirect hop is
//! checked, and a name cannot rebind between the check and the connection).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address is not public, or `None` for a public address.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_class(v4);
            }
            let s = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("private (unique local)")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xff00 == 0xff00 {
                Some("multicast")
            } else if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address.
                let v4 =
                    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                v4_class(v4)
            } else if s[0..6] == [0, 0, 0, 0, 0, 0] {
                // IPv4-compatible (::a.b.c.d, deprecated).
                Some("IPv4-compatible")
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                Some("documentation")
            } else {
                None
            }
        }
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        // 169.254.0.0/16, cloud metadata (169.254.169.254) included.
        Some("link-local")
    } else if o[0] == 0 {
        Some("unspecified")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if ip.is_multicast() || o[0] >= 240 {
        Some("multicast or reserved")
    } else if ip.is_documentation() || (o[0] == 198 && (o[1] & 0xfe) == 18) {
        Some("documentation or benchmarking")
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        Some("IETF protocol assignments")
    } else {
        None
    }
}

/// The message for a refused address.
pub fn refusal(host: &str, ip: IpAddr, class: &str) -> String {
    let what = if host.trim_matches(['[', ']']) == ip.to_string() {
        format!("{host} is a {class} address")
    } else {
        format!("{host} resolves to {ip}, a {class} address")
    };
    format!(
        "refused: {what} (web_fetch reaches only public addresses unless allowPrivateNetwork \
         is configured)"
    )
}

/// Why a host may not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host is, or resolves to, a non-public address.
    #[error("{}", refusal(host, *ip, class))]
    Refused {
        /// The host as the URL names it.
        host: String,
        /// The refused address.
        ip: IpAddr,
        /// Its class (`loopback`, `private`, …).
        class: &'static str,
    },
    /// The name resolved to no address.
    #[error("{host} did not resolve")]
    Unresolved {
        /// The host.
        host: String,
    },
    /// The lookup failed.
    #[error("cannot resolve {host}: {source}")]
    Lookup {
        /// The host.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
}

impl From<HostError> for String {
    /// The message a `web_fetch` refusal carries.
    fn from(e: HostError) -> String {
        e.to_string()
    }
}

/// A resolver that drops non-public addresses (unless allowed) and fails when none is left.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    /// Let private, loopback and link-local addresses through.
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let ok: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| match non_public(a.ip()) {
                    Some(class) if !allow => {
                        refused.get_or_insert_with(|| (a.ip(), class));
                        false
                    }
                    _ => true,
                })
                .collect();
            if ok.is_empty() {
                let err = match refused {
                    Some((ip, class)) => HostError::Refused { host, ip, class },
                    None => HostError::Unresolved { host },
                };
                return Err(err.into());
            }
            let addrs: Addrs = Box::new(ok.into_iter());
            Ok(addrs)
        })
    }
}

/// Resolves `host` and checks every address (the clear error before connecting; the
/// resolver enforces the same rule on the connection itself).
pub async fn check_host(host: &str, port: u16, allow_private: bool) -> Result<(), HostError> {
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return match non_public(ip) {
            Some(class) if !allow_private => Err(HostError::Refused {
                host: host.to_owned(),
                ip,
                class,
            }),
            _ => Ok(()),
        };
    }
    if allow_private {
        return Ok(());
    }
    let addrs = tokio::net::lookup_host((literal, port))
        .await
        .map_err(|source| HostError::Lookup {
            host: host.to_owned(),
            source,
        })?;
    for a in addrs {
        if let Some(class) = non_public(a.ip()) {
            return Err(HostError::Refused {
                host: host.to_owned(),
                ip: a.ip(),
                class,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_link_local_and_mapped_forms_are_not_public() {
        for (ip, want) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("100.64.0.1", "shared (carrier-grade NAT)"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("::127.0.0.1", "IPv4-compatible"),
        ] {
            assert_eq!(non_public(ip.parse().unwrap()), Some(want), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert_eq!(non_public(ip.parse().unwrap()), None, "{ip}");
        }
    }
}
