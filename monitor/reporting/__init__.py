"""What leaves the product: the SLA report, exports, /metrics."""
