//! StarPU's SimGrid platform file of one machine (`bus/MACHINE.platform.xml`,
//! SimGrid platform versions 3 and 4): the hosts (`CPU0`.., `CUDA0`..,
//! `OpenCL0`.., `RAM`) with their memory sizes and whether they copy to
//! their peers, the links with bandwidth and latency, and the routes
//! between hosts as lists of links.
//!
//! A route's figures are SimGrid's for one flow alone: its bandwidth is the
//! slowest link's, its latency the sum of its links'. Errors name the file
//! and the line.

use std::collections::HashMap;
use std::path::Path;

use super::StarpuError;

/// The platform files are under 100 KB (idgraf's 8 GPUs: 60 KB).
const MAX_FILE_BYTES: u64 = 16 << 20;

/// One `<host>`.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// `id`: `CPU3`, `CUDA0`, `RAM`, ...
    pub id: String,
    /// `memsize` property, bytes (devices only).
    pub memsize: Option<u64>,
    /// `memcpy_peer` property: the device copies to its peers directly.
    pub memcpy_peer: bool,
    /// Line in the file.
    pub line: usize,
}

/// One `<link>`: bytes per second and seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Bytes per second.
    pub bandwidth: f64,
    /// Seconds.
    pub latency: f64,
}

/// The parts of a SimGrid platform StarPU writes.
#[derive(Clone, Debug, PartialEq)]
pub struct SimgridPlatform {
    /// The file read.
    pub file: String,
    /// Every host, in file order.
    pub hosts: Vec<Host>,
    /// Links by id.
    pub links: HashMap<String, Link>,
    /// Routes: (src, dst) → link ids, and the route's line.
    pub routes: HashMap<(String, String), (Vec<String>, usize)>,
}

impl SimgridPlatform {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<SimgridPlatform, StarpuError> {
        let text = super::read_text(path, MAX_FILE_BYTES)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse `text`; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<SimgridPlatform, StarpuError> {
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|e| {
            StarpuError::at(
                file,
                e.pos().row as usize,
                format!("not well-formed XML: {e}"),
            )
        })?;
        let line = |n: roxmltree::Node<'_, '_>| doc.text_pos_at(n.range().start).row as usize;
        let root = doc.root_element();
        if root.tag_name().name() != "platform" {
            return Err(StarpuError::at(
                file,
                line(root),
                format!(
                    "the root element is <{}>, not <platform>",
                    root.tag_name().name()
                ),
            ));
        }
        let attr = |n: roxmltree::Node<'_, '_>, a: &str| -> Result<String, StarpuError> {
            n.attribute(a).map(str::to_string).ok_or_else(|| {
                StarpuError::at(
                    file,
                    line(n),
                    format!("<{}> without its '{a}' attribute", n.tag_name().name()),
                )
            })
        };
        let mut p = SimgridPlatform {
            file: file.to_string(),
            hosts: Vec::new(),
            links: HashMap::new(),
            routes: HashMap::new(),
        };
        for n in root.descendants().filter(|n| n.is_element()) {
            match n.tag_name().name() {
                "host" => {
                    let mut h = Host {
                        id: attr(n, "id")?.to_string(),
                        memsize: None,
                        memcpy_peer: false,
                        line: line(n),
                    };
                    for prop in n.children().filter(|c| c.has_tag_name("prop")) {
                        let value = attr(prop, "value")?;
                        match attr(prop, "id")?.as_str() {
                            "memsize" => {
                                h.memsize = Some(value.parse().map_err(|_| {
                                    StarpuError::at(
                                        file,
                                        line(prop),
                                        format!("memsize '{value}' is not a whole number of bytes"),
                                    )
                                })?)
                            }
                            "memcpy_peer" => h.memcpy_peer = value == "1",
                            _ => {}
                        }
                    }
                    if p.hosts.iter().any(|o| o.id == h.id) {
                        return Err(StarpuError::at(
                            file,
                            h.line,
                            format!("host '{}' given twice", h.id),
                        ));
                    }
                    p.hosts.push(h);
                }
                "link" => {
                    let id = attr(n, "id")?;
                    let at = line(n);
                    let bandwidth = quantity(&attr(n, "bandwidth")?, BANDWIDTH)
                        .filter(|b| *b > 0.0)
                        .ok_or_else(|| {
                            StarpuError::at(
                                file,
                                at,
                                format!(
                                    "link '{id}': bandwidth '{}' is not a positive rate (B/s, or with a unit: Bps, MBps, Gbps, ...)",
                                    n.attribute("bandwidth").unwrap_or_default()
                                ),
                            )
                        })?;
                    let latency = match n.attribute("latency") {
                        None => 0.0,
                        Some(l) => quantity(l, LATENCY).filter(|x| *x >= 0.0).ok_or_else(|| {
                            StarpuError::at(
                                file,
                                at,
                                format!("link '{id}': latency '{l}' is not a time (s, or with a unit: ms, us, ns)"),
                            )
                        })?,
                    };
                    p.links.insert(id.to_string(), Link { bandwidth, latency });
                }
                "route" => {
                    let (src, dst) = (attr(n, "src")?, attr(n, "dst")?);
                    let links = n
                        .children()
                        .filter(|c| c.has_tag_name("link_ctn"))
                        .map(|c| attr(c, "id"))
                        .collect::<Result<Vec<_>, _>>()?;
                    p.routes
                        .insert((src.to_string(), dst.to_string()), (links, line(n)));
                }
                _ => {}
            }
        }
        // Every link a route names must exist.
        for ((src, dst), (links, at)) in &p.routes {
            if let Some(l) = links.iter().find(|l| !p.links.contains_key(*l)) {
                return Err(StarpuError::at(
                    file,
                    *at,
                    format!("the route {src} -> {dst} names link '{l}', which no <link> declares"),
                ));
            }
        }
        Ok(p)
    }

    /// The host called `id`.
    pub fn host(&self, id: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.id == id)
    }

    /// Hosts whose id is `prefix` and a number (`CPU`: `CPU0`, `CPU1`, ...).
    pub fn count(&self, prefix: &str) -> usize {
        self.hosts
            .iter()
            .filter(|h| {
                h.id.strip_prefix(prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .count()
    }

    /// One flow from `src` to `dst`: the slowest link's bandwidth and the
    /// sum of the latencies along the route.
    pub fn route(&self, src: &str, dst: &str) -> Result<Link, StarpuError> {
        let (links, _) = self
            .routes
            .get(&(src.to_string(), dst.to_string()))
            .ok_or_else(|| {
                StarpuError::file(
                    &self.file,
                    format!("no <route src=\"{src}\" dst=\"{dst}\">"),
                )
            })?;
        let mut r = Link {
            bandwidth: f64::INFINITY,
            latency: 0.0,
        };
        for l in links {
            let l = self.links[l];
            r.bandwidth = r.bandwidth.min(l.bandwidth);
            r.latency += l.latency;
        }
        if !r.bandwidth.is_finite() {
            return Err(StarpuError::file(
                &self.file,
                format!("the route {src} -> {dst} has no link"),
            ));
        }
        Ok(r)
    }
}

/// SimGrid's bandwidth units, to bytes per second (bits: /8).
const BANDWIDTH: &[(&str, f64)] = &[
    ("TiBps", 1_099_511_627_776.0),
    ("GiBps", 1_073_741_824.0),
    ("MiBps", 1_048_576.0),
    ("KiBps", 1024.0),
    ("TBps", 1e12),
    ("GBps", 1e9),
    ("MBps", 1e6),
    ("kBps", 1e3),
    ("KBps", 1e3),
    ("Bps", 1.0),
    ("Tbps", 1e12 / 8.0),
    ("Gbps", 1e9 / 8.0),
    ("Mbps", 1e6 / 8.0),
    ("kbps", 1e3 / 8.0),
    ("bps", 1.0 / 8.0),
];

/// SimGrid's time units, to seconds.
const LATENCY: &[(&str, f64)] = &[
    ("ps", 1e-12),
    ("ns", 1e-9),
    ("us", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
];

/// `value` with an optional unit of `units` (none: the base unit, as
/// SimGrid 3 writes them); `None` when it is not a finite number.
fn quantity(value: &str, units: &[(&str, f64)]) -> Option<f64> {
    let v = value.trim();
    let (number, scale) = units
        .iter()
        .find_map(|(u, s)| v.strip_suffix(u).map(|n| (n, *s)))
        .unwrap_or((v, 1.0));
    let x: f64 = number.trim().parse().ok()?;
    let x = x * scale;
    x.is_finite().then_some(x)
}

#[cfg(test)]
mod tests {
    //! Proves the reader on a hand-written platform: hosts, memory sizes,
    //! units, and a route's bandwidth (the slowest link) and latency (the
    //! sum); and that damage is named by file and line.
    use super::*;

    pub(crate) const SMALL: &str = r#"<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "http://simgrid.gforge.inria.fr/simgrid/simgrid.dtd">
<platform version="4">
 <AS id="AS0" routing="Full">
   <host id="CPU0" speed="2000000000f"/>
   <host id="CPU1" speed="2000000000f"/>
   <host id="CUDA0" speed="2000000000f">
     <prop id="memsize" value="1073741824"/>
     <prop id="memcpy_peer" value="1"/>
   </host>
   <host id="RAM" speed="1f"/>
   <link id="Host" bandwidth="8GBps" latency="0.000001"/>
   <link id="RAM-CUDA0" bandwidth="4000000000" latency="10us"/>
   <link id="CUDA0-RAM" bandwidth="5000000000Bps" latency="0.000012s"/>
   <route src="RAM" dst="CUDA0" symmetrical="NO"><link_ctn id="RAM-CUDA0"/><link_ctn id="Host"/></route>
   <route src="CUDA0" dst="RAM" symmetrical="NO"><link_ctn id="CUDA0-RAM"/><link_ctn id="Host"/></route>
 </AS>
</platform>
"#;

    #[test]
    fn a_small_platform_reads_as_written() {
        let p = SimgridPlatform::parse(SMALL, "small.xml").unwrap();
        assert_eq!(
            (p.count("CPU"), p.count("CUDA"), p.count("OpenCL")),
            (2, 1, 0)
        );
        let gpu = p.host("CUDA0").unwrap();
        assert_eq!(
            (gpu.memsize, gpu.memcpy_peer, gpu.line),
            (Some(1 << 30), true, 7)
        );
        let down = p.route("RAM", "CUDA0").unwrap();
        assert_eq!(down.bandwidth, 4e9);
        assert!((down.latency - 11e-6).abs() < 1e-18, "{}", down.latency);
        let up = p.route("CUDA0", "RAM").unwrap();
        assert_eq!(up.bandwidth, 5e9);
        assert!((up.latency - 13e-6).abs() < 1e-18);
        assert_eq!(quantity("10Gbps", BANDWIDTH), Some(1.25e9));
        assert_eq!(quantity("2ms", LATENCY), Some(2e-3));
    }

    #[test]
    fn damage_is_named_by_file_and_line() {
        let e = SimgridPlatform::parse(&SMALL.replace("4000000000\"", "fast\""), "bad.xml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad.xml:13: link 'RAM-CUDA0': bandwidth 'fast'"),
            "{e}"
        );
        let e = SimgridPlatform::parse(
            &SMALL.replace(
                "<link_ctn id=\"Host\"/></route>\n   <route src=\"CUDA0\"",
                "<link_ctn id=\"Nope\"/></route>\n   <route src=\"CUDA0\"",
            ),
            "bad.xml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "bad.xml:15: the route RAM -> CUDA0 names link 'Nope', which no <link> declares"
        );
        let cut = &SMALL[..SMALL.len() / 2];
        let e = SimgridPlatform::parse(cut, "bad.xml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad.xml:") && e.contains("not well-formed XML"),
            "{e}"
        );
        let e = SimgridPlatform::parse(SMALL, "bad.xml")
            .unwrap()
            .route("CUDA0", "CUDA1")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "bad.xml: no <route src=\"CUDA0\" dst=\"CUDA1\">");
    }
}
