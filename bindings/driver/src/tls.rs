//! TLS for `rediss://` URLs: whom to trust and who we are.
//!
//! By default the server certificate is checked against the operating
//! system's trust store (`SSL_CERT_FILE` / `SSL_CERT_DIR` honoured). A client
//! may instead trust its own CA bundle (a private CA), present a client
//! certificate (mutual TLS), or — only through a loudly named option that
//! logs a warning — skip verification altogether.

use std::fmt;
use std::path::PathBuf;

use fencelock_core::Error;

/// PEM data, given inline or as a file to read at connect.
#[derive(Clone, PartialEq, Eq)]
pub enum Pem {
    /// The PEM text itself (`-----BEGIN ...`).
    Data(Vec<u8>),
    /// A file holding it.
    File(PathBuf),
}

impl Pem {
    /// A string that holds PEM text is the data; anything else is a path.
    pub fn from_text_or_path(value: impl Into<String>) -> Pem {
        let value = value.into();
        if value.contains("-----BEGIN") {
            Pem::Data(value.into_bytes())
        } else {
            Pem::File(value.into())
        }
    }

    fn load(&self, what: &str) -> Result<Vec<u8>, Error> {
        match self {
            Pem::Data(data) => Ok(data.clone()),
            Pem::File(path) => std::fs::read(path).map_err(|e| {
                Error::invalid(format!("cannot read the TLS {what} file {path:?}: {e}"))
            }),
        }
    }
}

impl fmt::Debug for Pem {
    /// Never the contents: a key is a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::Data(data) => write!(f, "<PEM, {} bytes>", data.len()),
            Pem::File(path) => write!(f, "{path:?}"),
        }
    }
}

/// TLS settings for every `rediss://` node of a client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Trust only these CA certificates (a bundle) instead of the system
    /// store: for servers whose certificates a private CA signed.
    pub ca: Option<Pem>,
    /// Client certificate chain, for servers that require mutual TLS
    /// (`tls-auth-clients yes`); needs `client_key` too.
    pub client_cert: Option<Pem>,
    /// The client certificate's private key.
    pub client_key: Option<Pem>,
    /// Check the server certificate against this name (a DNS name or an IP
    /// address) instead of the URL's host: for connecting by IP address (or
    /// through a tunnel) to a server whose certificate names
    /// `redis.internal`. Applies to every connection of the client (data,
    /// pub/sub, Sentinels and the primary they name); not available with
    /// `Topology::Cluster`, whose nodes are reached at the addresses they
    /// announce.
    pub server_name: Option<String>,
    /// DANGER: accept ANY server certificate, for any name — anyone on the
    /// path can impersonate the server. For throwaway test servers only; a
    /// warning is logged at connect. (Also what `rediss://...#insecure`
    /// needs: that fragment alone is refused.)
    pub dangerously_skip_verification: bool,
}

impl TlsOptions {
    fn is_set(&self) -> bool {
        *self != TlsOptions::default()
    }
}

/// The loaded form, ready for redis-rs.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    certificates: Option<redis::TlsCertificates>,
    pub skip_verification: bool,
    server_name: Option<String>,
}

/// A redis-rs client for one server, and how its connections must be made.
pub(crate) struct Target {
    pub client: redis::Client,
    /// With a server-name override the client's host IS that name (so
    /// rustls checks the certificate against it), and connections resolve
    /// the real host instead.
    dial: Option<DialHost>,
}

impl Target {
    /// `config`, with the resolver a server-name override needs.
    pub(crate) fn config(
        &self,
        config: redis::AsyncConnectionConfig,
    ) -> redis::AsyncConnectionConfig {
        match &self.dial {
            Some(dial) => config.set_dns_resolver(dial.clone()),
            None => config,
        }
    }
}

/// Resolves whatever name redis-rs asks for to the URL's real host: the
/// TCP connection goes where the URL says, the TLS name is the override.
#[derive(Clone)]
struct DialHost(String);

impl redis::io::AsyncDNSResolver for DialHost {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        _name: &'b str,
        port: u16,
    ) -> redis::RedisFuture<'a, Box<dyn Iterator<Item = std::net::SocketAddr> + Send + 'a>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((self.0.as_str(), port)).await?;
            Ok(Box::new(addrs) as Box<dyn Iterator<Item = _> + Send>)
        })
    }
}

impl Tls {
    /// Read the files, check the combination against the URLs and the
    /// topology.
    pub(crate) fn load(
        options: &TlsOptions,
        topology: &crate::Topology,
        urls: &[String],
    ) -> Result<Tls, Error> {
        if options.server_name.is_some() && *topology == crate::Topology::Cluster {
            return Err(Error::invalid(
                "a TLS server name is not available with topology \"cluster\": redis-rs \
                 reaches cluster nodes at the addresses they announce; give them \
                 certificates for those addresses, or have them announce host names \
                 (cluster-announce-hostname, cluster-preferred-endpoint-type hostname)",
            ));
        }
        let any_tls = urls
            .iter()
            .any(|u| u.trim_start().to_ascii_lowercase().starts_with("rediss://"));
        if options.is_set() && !any_tls {
            return Err(Error::invalid(
                "TLS options need rediss:// URLs (these URLs do not use TLS)",
            ));
        }
        if let Some(url) = urls.iter().find(|u| u.trim_end().ends_with("#insecure")) {
            if !options.dangerously_skip_verification {
                return Err(Error::invalid(format!(
                    "{:?} asks for TLS without certificate verification; that takes the \
                     explicit dangerously-skip-verification option (and then no #insecure)",
                    crate::url::redact(url)
                )));
            }
        }
        let client_tls = match (&options.client_cert, &options.client_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: cert.load("client certificate")?,
                client_key: key.load("client key")?,
            }),
            _ => {
                return Err(Error::invalid(
                    "a TLS client certificate needs its key, and a key its certificate",
                ))
            }
        };
        let root_cert = options.ca.as_ref().map(|ca| ca.load("CA")).transpose()?;
        if let Some(name) = &options.server_name {
            if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
                return Err(Error::invalid(format!(
                    "TLS server name {name:?} is neither a DNS name nor an IP address"
                )));
            }
            if options.dangerously_skip_verification {
                return Err(Error::invalid(
                    "a TLS server name means nothing without verification: \
                     drop it or the dangerously-skip-verification option",
                ));
            }
        }
        let certificates =
            (client_tls.is_some() || root_cert.is_some()).then_some(redis::TlsCertificates {
                client_tls,
                root_cert,
            });
        Ok(Tls {
            certificates,
            skip_verification: options.dangerously_skip_verification,
            server_name: options.server_name.clone(),
        })
    }

    /// Said once per client, when it connects (not when options are only
    /// checked, so a lazily connecting client warns once too).
    pub(crate) fn warn_if_unverified(&self) {
        if self.skip_verification {
            tracing::warn!(
                "TLS certificate verification is OFF (dangerously_skip_verification): \
                 anyone on the network path can impersonate the Redis server"
            );
        }
    }

    /// The URL as redis-rs must see it: `#insecure` exactly when the
    /// dangerous option is on.
    pub(crate) fn url(&self, url: &str) -> String {
        let trimmed = url.trim();
        let is_tls = trimmed.to_ascii_lowercase().starts_with("rediss://");
        match (
            self.skip_verification && is_tls,
            trimmed.ends_with("#insecure"),
        ) {
            (true, false) => format!("{trimmed}#insecure"),
            _ => trimmed.to_owned(),
        }
    }

    /// The certificates for redis-rs's cluster client, if any were given.
    pub(crate) fn certificates(&self) -> Option<redis::TlsCertificates> {
        self.certificates.clone()
    }

    /// A redis-rs client for `info` with these certificates and, for a
    /// `rediss://` server, the server-name override.
    pub(crate) fn target(
        &self,
        info: redis::ConnectionInfo,
        redacted: &str,
    ) -> Result<Target, Error> {
        let (info, dial) = match (info.addr().clone(), &self.server_name) {
            (
                redis::ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure,
                    tls_params,
                },
                Some(name),
            ) => (
                info.set_addr(redis::ConnectionAddr::TcpTls {
                    host: name.clone(),
                    port,
                    insecure,
                    tls_params,
                }),
                Some(DialHost(host)),
            ),
            _ => (info, None),
        };
        let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
        let result = match &self.certificates {
            Some(certificates) if tls => redis::Client::build_with_tls(info, certificates.clone()),
            _ => redis::Client::open(info),
        };
        let client =
            result.map_err(|e| Error::invalid(format!("cannot set up {redacted:?}: {e}")))?;
        Ok(Target { client, dial })
    }
}
