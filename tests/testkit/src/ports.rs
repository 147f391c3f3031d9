//! Ports from `ci/ports.sh`, the one allocator of every test server
//! (tests/README.md): a reserved range below the ephemeral one, each port
//! claimed for this process until released or until the process exits, its
//! cluster bus port (+10000) free too. Binding port 0 and releasing it would
//! race with other servers, other test runs and client sockets.

use std::path::PathBuf;
use std::process::Command;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../ci/ports.sh")
}

/// Claim `n` ports for this process. Panics if the allocator fails (a
/// harness problem, not a test outcome).
pub fn claim(n: usize) -> Vec<u16> {
    let out = Command::new("bash")
        .arg(script())
        .args([
            "claim",
            &n.to_string(),
            "--owner",
            &std::process::id().to_string(),
        ])
        .output()
        .expect("run bash ci/ports.sh");
    assert!(
        out.status.success(),
        "ci/ports.sh claim failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|p| p.parse().expect("ci/ports.sh prints ports"))
        .collect()
}

/// Give ports back (a port whose owner exited is reclaimed anyway).
pub fn release(ports: &[u16]) {
    let _ = Command::new("bash")
        .arg(script())
        .arg("release")
        .args(ports.iter().map(u16::to_string))
        .status();
}

/// One claimed port, released on drop: for a test that needs a port where
/// nothing listens, or a second port (TLS) for a server.
#[derive(Debug)]
pub struct Port(pub u16);

impl Port {
    pub fn claim() -> Port {
        Port(claim(1)[0])
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        release(&[self.0]);
    }
}
