//! Logical routers as separate processes (../shared/DESIGN.md, "Logical routers"): each LR's
//! CPUs and memory limit ([`cgroup`]) and the supervisor that runs one Linerate process per LR
//! ([`supervisor`]). Its file is read by [`crate::config::lr`].

pub mod cgroup;
pub mod supervisor;
