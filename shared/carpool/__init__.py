"""carpool: a serverless Kubernetes node autoscaler for Amazon EKS.

Everything that decides lives in this package; AWS and Kubernetes are reached only through
`carpool.adapters`, so the scheduling, sizing and AMI logic can be tested as plain data in, data out.
"""

__version__ = "0.1.0"
