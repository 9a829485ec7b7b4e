//! One TLS client configuration for every HTTP client of a dsh process.
//!
//! Building the platform's certificate verifier loads and parses every root certificate of the
//! system (tens of milliseconds of CPU on a typical Linux bundle). Every client used to build
//! its own at construction, at mount, before anything needed TLS. [`client_config`] returns a
//! configuration whose verifier is a [`LazyVerifier`]: the platform verifier is built once per
//! process, by the first handshake that checks a server certificate, and shared by every
//! client after that. A process that only talks plain HTTP (a local mock, a local model
//! server) never loads the roots.

use std::sync::{Arc, Once, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Installs rustls' `ring` provider as the process default once (a provider installed by
/// someone else is kept).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The process's crypto provider: the installed default, else `ring`.
fn provider() -> Arc<CryptoProvider> {
    install_crypto_provider();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The shared TLS client configuration, as reqwest would build it (TLS 1.2 and 1.3, ALPN `h2`
/// then `http/1.1`, no client certificate), with the process's one [`LazyVerifier`]. Cheap:
/// no certificate is read until a handshake needs one. `None` only when the provider
/// supports no safe protocol version (a broken custom provider); callers then let their HTTP
/// library build its own configuration.
pub fn client_config() -> Option<rustls::ClientConfig> {
    static CONFIG: OnceLock<Option<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = provider();
            let verifier = shared_verifier(&provider);
            let mut tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .ok()?
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth();
            tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Some(tls)
        })
        .clone()
}

fn shared_verifier(provider: &Arc<CryptoProvider>) -> Arc<LazyVerifier> {
    static VERIFIER: OnceLock<Arc<LazyVerifier>> = OnceLock::new();
    VERIFIER
        .get_or_init(|| Arc::new(LazyVerifier::new(provider.clone())))
        .clone()
}

/// Whether the platform verifier (and so the system's root certificates) has been loaded in
/// this process: `false` until a TLS handshake checked a server certificate.
pub fn roots_loaded() -> bool {
    shared_verifier(&provider()).is_loaded()
}

/// A [`ServerCertVerifier`] that builds `rustls_platform_verifier::Verifier` on first use.
///
/// Signature checks and the advertised schemes come from the crypto provider, which is what
/// the platform verifier itself uses on Linux, so a `ClientHello` never forces the roots;
/// only [`ServerCertVerifier::verify_server_cert`] does. A verifier that cannot be built (no
/// root certificate on the system) fails every certificate check with its error.
#[derive(Debug)]
pub struct LazyVerifier {
    provider: Arc<CryptoProvider>,
    platform: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyVerifier {
    /// A verifier that loads nothing yet.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            platform: OnceLock::new(),
        }
    }

    /// Whether the platform verifier has been built.
    pub fn is_loaded(&self) -> bool {
        self.platform.get().is_some()
    }

    fn platform(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.platform
            .get_or_init(|| {
                let built = rustls_platform_verifier::Verifier::new(self.provider.clone());
                match &built {
                    Ok(_) => tracing::debug!("platform certificate verifier loaded"),
                    Err(e) => tracing::warn!("platform certificate verifier unavailable: {e}"),
                }
                built
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.platform()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertising_schemes_loads_no_root_certificate() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let lazy = LazyVerifier::new(provider.clone());
        assert!(!lazy.is_loaded());
        assert_eq!(
            lazy.supported_verify_schemes(),
            provider
                .signature_verification_algorithms
                .supported_schemes()
        );
        assert!(!lazy.is_loaded(), "advertising schemes must not load roots");
    }

    #[test]
    fn the_first_certificate_check_loads_the_roots_once() {
        let lazy = LazyVerifier::new(Arc::new(rustls::crypto::ring::default_provider()));
        let name = ServerName::try_from("example.invalid").expect("name");
        let garbage = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
        let first = lazy.verify_server_cert(&garbage, &[], &name, &[], UnixTime::now());
        assert!(first.is_err(), "a garbage certificate is refused");
        assert!(lazy.is_loaded());
        let second = lazy.verify_server_cert(&garbage, &[], &name, &[], UnixTime::now());
        assert_eq!(first.err(), second.err());
    }

    #[test]
    fn the_shared_configuration_offers_http2_first() {
        let tls = client_config().expect("ring supports TLS 1.2 and 1.3");
        assert_eq!(
            tls.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }
}
