"""The broker process: storage, partition leadership and the gRPC data plane."""
