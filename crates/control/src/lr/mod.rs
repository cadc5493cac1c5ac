//! Logical routers as separate processes (../shared/DESIGN.md, "Logical routers"): what the
//! supervisor that runs them needs. So far: [`cgroup`], each LR's CPUs and memory limit.

pub mod cgroup;
