//! A real forward proxy for tests: Debian's `tinyproxy`, started on a free loopback port with
//! basic authentication, logging every request it relays to a file the test reads.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct ForwardProxy {
    pub port: u16,
    pub user: String,
    pub password: String,
    log: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl ForwardProxy {
    /// Starts tinyproxy on 127.0.0.1, requiring `user`/`password`. Panics when tinyproxy is not
    /// installed (scripts/test.sh installs it) or does not listen within 10 seconds.
    pub fn start(user: &str, password: &str) -> ForwardProxy {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.path().join("tinyproxy.log");
        let conf = dir.path().join("tinyproxy.conf");
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListen 127.0.0.1\nTimeout 30\nLogFile \"{}\"\nLogLevel Info\nMaxClients 20\n\
                 Allow 127.0.0.1\nBasicAuth {user} {password}\nDisableViaHeader Yes\n",
                log.display()
            ),
        )
        .unwrap();
        let child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tinyproxy is installed (scripts/test.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tinyproxy did not listen on 127.0.0.1:{port} within 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        ForwardProxy { port, user: user.into(), password: password.into(), log, child, _dir: dir }
    }

    /// `http://user:password@127.0.0.1:port`, or with another password.
    pub fn url_with(&self, password: &str) -> String {
        format!("http://{}:{}@127.0.0.1:{}", self.user, password, self.port)
    }

    pub fn url(&self) -> String {
        self.url_with(&self.password)
    }

    /// The log lines of the requests the proxy received (`CONNECT host:port` or a proxied `GET`).
    pub fn relayed(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("Request (file descriptor"))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
