//! Every answer of the API as a type, one module per area of the router. The server fills them
//! (`control::mgmt::Core`'s show methods return them), the client reads them back, and each
//! renders itself once, as `linerate show ...` prints it.
//!
//! Compatibility: fields are only ever added (with `#[serde(default)]` where an older router
//! may leave them out), so a newer CLI reads an older router's answers.

pub mod atm;
pub mod bridges;
pub mod config;
pub mod control_plane;
pub mod cpu;
pub mod dlsw;
pub mod events;
pub mod graph;
pub mod gtp;
pub mod interfaces;
pub mod l3vpn;
pub mod ldp;
pub mod lr;
pub mod mpls;
pub mod mroute;
pub mod routes;
pub mod services;
pub mod snooping;
pub mod system;

pub use atm::{AtmPortView, AtmPvcView, AtmView};
pub use bridges::{
    BridgeMemberView, BridgeView, MacCleared, MacEntryView, MacTableStats, MacTableView,
};
pub use config::{ApplyOutcome, CommitText, CommitView, RunningConfig};
pub use control_plane::{FpmStatus, NeighborStats, PuntClassView, PuntView, TapView};
pub use cpu::{CpuRow, CpuView, ThreadKind};
pub use dlsw::{
    DlswCircuitView, DlswCircuitsView, DlswPeerView, DlswPeersView, DlswReachView,
    DlswReachabilityView, DlswTotals,
};
pub use events::{EventActionView, EventFlowsView, EventManagerView, EventRuleView};
pub use graph::{ErrorView, NodeRuntime, RuntimeView, StepView, TraceView, WorkerRuntime};
pub use gtp::{ApnView, GtpContextView, GtpContextsView, GtpStatsView};
pub use interfaces::{
    CountersView, InterfaceView, LinkDiagView, NeighborView, PortCountersView, PortDriver,
    PortView, QueueView, WorkerAdded, WorkerView,
};
pub use l3vpn::{BgpVpnView, VpnRouteView, VpnStatus, VpnVrfView, VrfView};
pub use ldp::{
    LdpAdjacency, LdpBindingView, LdpDiscoveryView, LdpNeighbor, LdpNeighborView, LdpPrefixBinding,
    LdpPwBinding,
};
pub use lr::{LogicalRouterView, LogicalRoutersView};
pub use mpls::{L2vpnView, MplsLabelView, MplsView, PseudowireView};
pub use mroute::{MrouteEntryView, MrouteView};
pub use routes::{NextHopKind, RouteOrigin, RouteView, RoutesView};
pub use services::{
    AclEntryView, AclView, ExportCounters, FlowsView, PolicerView, QosClassView, QosView,
};
pub use snooping::{SnoopGroupView, SnoopMemberView, SnoopRouterView, SnoopView};
pub use system::{CommandStats, LogView, SystemView, TableView};

/// A view as the CLI prints it (text for people; `--json` prints the view's JSON instead).
pub trait Render {
    fn render(&self) -> String;
}

#[cfg(test)]
mod tests;
