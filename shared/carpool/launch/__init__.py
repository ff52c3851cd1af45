"""Turning a claim into an EC2 launch: user data (`userdata`), launch templates grouped by AMI, max pods
and user-data inputs (`templates`), and the CreateFleet request/response (`fleet`). All pure."""
