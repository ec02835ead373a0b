"""Pure rules without database or clock: the state machines, the scheduling wheel, maintenance
window times."""
