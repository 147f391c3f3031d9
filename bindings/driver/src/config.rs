//! [`ClientConfig`]: a client's URLs and options, validated once. Every
//! bounded value is a core newtype ([`KeySpace`], [`Timeout`],
//! [`FenceGrace`]), so nothing after this point checks a value again.

use std::fmt;
use std::time::Duration;

use fencelock_core::{Error, FenceGrace, KeySpace, Timeout};

use crate::tls::{Tls, TlsOptions};
use crate::url::NodeUrl;
use crate::{ClientOptions, IntoUrls, Topology};

/// [`ClientOptions`] with every value already of its validated type: what
/// the bindings fill in (one core constructor per value, in their own unit),
/// and what [`ClientConfig::new`] turns Rust's `Duration`s into.
#[derive(Clone, Debug, Default)]
pub struct ClientSettings {
    pub keyspace: KeySpace,
    pub connect_timeout: Timeout,
    pub response_timeout: Timeout,
    pub topology: Topology,
    pub replicas: u32,
    pub fence_grace: FenceGrace,
    pub tls: TlsOptions,
}

impl TryFrom<ClientOptions> for ClientSettings {
    type Error = Error;

    fn try_from(options: ClientOptions) -> Result<Self, Error> {
        Ok(ClientSettings {
            keyspace: KeySpace::new(options.prefix.as_bytes())?,
            connect_timeout: Timeout::from_duration("connect_timeout", options.connect_timeout)?,
            response_timeout: Timeout::from_duration("response_timeout", options.response_timeout)?,
            topology: options.topology,
            replicas: options.replicas,
            fence_grace: FenceGrace::from_duration(options.fence_grace)?,
            tls: options.tls,
        })
    }
}

/// Everything [`crate::Client::connect_config`] needs, checked: the URLs
/// parsed (at least one, no node twice), the TLS files read and their
/// combination with the URLs and topology accepted. Cheap to clone; lets
/// clients that connect lazily (Python's) refuse bad arguments at
/// construction, as redis-py does, and connect later without re-checking.
#[derive(Clone)]
pub struct ClientConfig {
    pub(crate) urls: Vec<NodeUrl>,
    pub(crate) tls: Tls,
    pub(crate) keyspace: KeySpace,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) topology: Topology,
    pub(crate) replicas: u32,
    pub(crate) fence_grace: FenceGrace,
}

impl ClientConfig {
    /// Rust's options (`Duration`s, a `String` prefix), each converted once.
    pub fn new(urls: impl IntoUrls, options: ClientOptions) -> Result<Self, Error> {
        Self::from_settings(urls, options.try_into()?)
    }

    /// Typed settings: only the URLs and TLS are left to check. Malformed
    /// URLs are `InvalidArgument` with passwords redacted.
    pub fn from_settings(urls: impl IntoUrls, settings: ClientSettings) -> Result<Self, Error> {
        let urls = urls.into_urls();
        let tls = Tls::load(&settings.tls, &settings.topology, &urls)?;
        let urls: Vec<String> = urls.iter().map(|u| tls.url(u)).collect();
        Ok(ClientConfig {
            urls: crate::url::parse_all(&urls)?,
            tls,
            keyspace: settings.keyspace,
            connect_timeout: settings.connect_timeout.as_duration(),
            response_timeout: settings.response_timeout.as_duration(),
            topology: settings.topology,
            replicas: settings.replicas,
            fence_grace: settings.fence_grace,
        })
    }

    /// How many URLs were given.
    pub fn node_count(&self) -> usize {
        self.urls.len()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &[u8] {
        self.keyspace.prefix()
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<&str> = self.urls.iter().map(|u| u.redacted.as_str()).collect();
        f.debug_struct("ClientConfig")
            .field("nodes", &nodes)
            .field("prefix", &String::from_utf8_lossy(self.prefix()))
            .field("topology", &self.topology)
            .finish_non_exhaustive()
    }
}
