//! net-snmp's snmpd for the scenarios that poll the LRs by SNMP (XR-2C): the AgentX master each
//! LR's IF-MIB subagent registers with, in a context named after the LR; v2c on loopback, the
//! community `pub-NAME` reading context NAME. And snmpbulkwalk, the poller.
//!
//! Reads: nothing of ours. Writes: its config and log in the LRs' work folder.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program of net-snmp's, where Debian puts it.
fn find(name: &str, package: &str) -> Result<PathBuf, String> {
    let dirs = std::env::var("PATH").unwrap_or_default();
    let found = dirs
        .split(':')
        .chain(["/usr/sbin", "/usr/bin", "/sbin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found.ok_or_else(|| format!("{name} not found: install Debian's {package} package"))
}

pub struct Snmpd {
    child: Child,
    /// Its AgentX socket, for the LRs' `snmp.agentx`.
    pub agentx: PathBuf,
    /// The UDP port it answers on, on 127.0.0.1.
    pub port: u16,
    walker: PathBuf,
}

impl Snmpd {
    /// The master's socket an LR config names; the file appears once [`Snmpd::start`] ran.
    pub fn socket(work: &Path) -> PathBuf {
        work.join("agentx.sock")
    }

    /// Starts snmpd with a context per name in `contexts`; waits for its AgentX socket.
    pub fn start(work: &Path, contexts: &[&str]) -> Result<Snmpd, String> {
        let bin = find("snmpd", "snmpd")?;
        let walker = find("snmpbulkwalk", "snmp")?;
        let agentx = Snmpd::socket(work);
        let _ = std::fs::remove_file(&agentx);
        let port = 16100 + (std::process::id() % 800) as u16;
        let mut conf = vec![
            "master agentx".to_string(),
            format!("agentXSocket unix:{}", agentx.display()),
            "agentXPerms 0660 0770".into(),
            format!("agentaddress udp:127.0.0.1:{port}"),
            "view all included .1".into(),
        ];
        for c in contexts {
            conf.push(format!("com2sec -Cn {c} sec{c} 127.0.0.1 pub-{c}"));
            conf.push(format!("group grp{c} v2c sec{c}"));
            conf.push(format!("access grp{c} {c} any noauth exact all none none"));
        }
        let conf_path = work.join("snmpd.conf");
        std::fs::write(&conf_path, conf.join("\n") + "\n")
            .map_err(|e| format!("{}: {e}", conf_path.display()))?;
        let child = Command::new(&bin)
            .args(["-f", "-C", "-c"])
            .arg(&conf_path)
            .args(["-m", "", "-Lf"])
            .arg(work.join("snmpd.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let s = Snmpd {
            child,
            agentx,
            port,
            walker,
        };
        let t0 = Instant::now();
        while !s.agentx.exists() {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "snmpd made no AgentX socket in 10 s (see {})",
                    work.join("snmpd.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(s)
    }

    /// One walk of IF-MIB's `interfaces` and `ifXTable` in `context` with GetBulk: the
    /// objects read (0 when the LR's subagent is not registered there).
    pub fn walk(&self, context: &str) -> Result<usize, String> {
        let mut n = 0;
        for subtree in [".1.3.6.1.2.1.2", ".1.3.6.1.2.1.31.1.1"] {
            let out = Command::new(&self.walker)
                .args([
                    "-v2c",
                    "-c",
                    &format!("pub-{context}"),
                    "-On",
                    "-m",
                    "",
                    "-t",
                    "2",
                ])
                .arg(format!("127.0.0.1:{}", self.port))
                .arg(subtree)
                .output()
                .map_err(|e| format!("{}: {e}", self.walker.display()))?;
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
            }
            n += String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.starts_with(subtree) && !l.contains("No Such"))
                .count();
        }
        Ok(n)
    }

    /// Keeps snmpd on CPU `cpu` (util-linux's taskset); whether it could.
    pub fn pin(&self, cpu: usize) -> bool {
        Command::new("taskset")
            .args(["-cp", &cpu.to_string(), &self.child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU seconds snmpd has used.
    pub fn cpu_s(&self) -> f64 {
        proc_cpu_s(self.child.id())
    }
}

impl Drop for Snmpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.agentx);
    }
}

/// A process's user + system CPU seconds (/proc/PID/stat, clock ticks of 1/100 s).
pub fn proc_cpu_s(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}
