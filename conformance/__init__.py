"""hcspec conformance kit: property-based tests any HC/mHC implementation can run."""
