"""What the CUR's values mean in FOCUS 1.2: line item types as charge categories and frequencies, AWS
services as service categories, GPU instance families as GPU models (the FinOps Foundation's
``conversion_rules_aws-cur.csv`` where it has a rule). Read by ``cur_mapping.py``'s SELECT.
"""

from __future__ import annotations

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.focus_values import subcategory_of

# lineItem/LineItemType -> FOCUS ChargeCategory (conversion_rules_aws-cur.csv), ChargeFrequency
CHARGE_CATEGORY = {
    "Tax": "Tax",
    "Fee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase",
    "RIFee": "Purchase",
    "SavingsPlanRecurringFee": "Purchase",
    "Usage": "Usage",
    "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Usage",
    "DiscountedUsage": "Usage",
    "BundledDiscount": "Usage",
    "Discount": "Usage",
    "PrivateRateDiscount": "Usage",
    "EdpDiscount": "Usage",
    "Credit": "Credit",
    "Refund": "Adjustment",
}
CHARGE_FREQUENCY = {
    "Fee": "One-Time",
    "SavingsPlanUpfrontFee": "One-Time",
    "Refund": "One-Time",
    "Credit": "One-Time",
    "RIFee": "Recurring",
    "SavingsPlanRecurringFee": "Recurring",
    "Tax": "Recurring",
}
# AWS services -> (FOCUS ServiceCategory, ServiceSubcategory), by product code and by product name
# (ServiceName is the product name, else the code): one category and subcategory per ServiceName, as
# FOCUS 1.2 requires, so EBS volumes and snapshots, billed under "Amazon Elastic Compute Cloud", are
# Compute / Virtual Machines like the instances (AWS's own FOCUS export splits EC2 into Compute and
# Storage: tests/data/focus-sample).
AWS_SERVICES: dict[tuple[str, str], tuple[str, str]] = {
    ("AmazonEC2", "Amazon Elastic Compute Cloud"): subcategory_of("Compute", "Virtual Machines"),
    ("AmazonECS", "Amazon Elastic Container Service"): subcategory_of("Compute", "Containers"),
    ("AmazonEKS", "Amazon Elastic Container Service for Kubernetes"): subcategory_of("Compute", "Containers"),
    ("AmazonECR", "Amazon EC2 Container Registry (ECR)"): subcategory_of("Compute", "Containers"),
    ("AWSLambda", "AWS Lambda"): subcategory_of("Compute", "Serverless Compute"),
    ("AmazonSageMaker", "Amazon SageMaker"): subcategory_of("AI and Machine Learning", "Machine Learning"),
    ("AmazonBedrock", "Amazon Bedrock"): subcategory_of("AI and Machine Learning", "Generative AI"),
    ("AmazonS3", "Amazon Simple Storage Service"): subcategory_of("Storage", "Object Storage"),
    ("AmazonEFS", "Amazon Elastic File System"): subcategory_of("Storage", "File Storage"),
    ("AmazonFSx", "Amazon FSx"): subcategory_of("Storage", "File Storage"),
    ("AWSBackup", "AWS Backup"): subcategory_of("Storage", "Backup Storage"),
    ("AmazonRDS", "Amazon Relational Database Service"): subcategory_of("Databases", "Relational Databases"),
    ("AmazonDynamoDB", "Amazon DynamoDB"): subcategory_of("Databases", "NoSQL Databases"),
    ("AmazonElastiCache", "Amazon ElastiCache"): subcategory_of("Databases", "Caching"),
    ("AWSDataTransfer", "AWS Data Transfer"): subcategory_of("Networking", "Network Connectivity"),
    ("AmazonVPC", "Amazon Virtual Private Cloud"): subcategory_of("Networking", "Network Infrastructure"),
    ("AmazonCloudFront", "Amazon CloudFront"): subcategory_of("Networking", "Content Delivery"),
    ("AmazonRoute53", "Amazon Route 53"): subcategory_of("Networking", "Network Routing"),
    ("AWSELB", "Elastic Load Balancing"): subcategory_of("Networking", "Application Networking"),
    ("AmazonCloudWatch", "AmazonCloudWatch"): subcategory_of("Management and Governance", "Observability"),
    ("AWSCloudTrail", "AWS CloudTrail"): subcategory_of("Management and Governance", "Compliance"),
    ("AWSConfig", "AWS Config"): subcategory_of("Management and Governance", "Compliance"),
    ("AWSSupportBusiness", "AWS Support (Business)"): subcategory_of("Management and Governance", "Support"),
    ("AWSSupportEnterprise", "AWS Support (Enterprise)"): subcategory_of("Management and Governance", "Support"),
    ("AWSCostExplorer", "AWS Cost Explorer"): subcategory_of("Management and Governance", "Cost Management"),
    ("AmazonAthena", "Amazon Athena"): subcategory_of("Analytics", "Data Processing"),
    ("AmazonKinesis", "Amazon Kinesis"): subcategory_of("Analytics", "Streaming Analytics"),
    ("AWSGlue", "AWS Glue"): subcategory_of("Analytics", "Data Processing"),
    ("AmazonSNS", "Amazon Simple Notification Service"): subcategory_of("Integration", "Messaging"),
    ("AWSQueueService", "Amazon Simple Queue Service"): subcategory_of("Integration", "Messaging"),
    ("awskms", "AWS Key Management Service"): subcategory_of("Security", "Secret Management"),
    ("AWSSecretsManager", "AWS Secrets Manager"): subcategory_of("Security", "Secret Management"),
}
SERVICES_BY_NAME = {name: pair for (code, name), pair in AWS_SERVICES.items()}
SERVICES_BY_CODE = {code: pair for (code, name), pair in AWS_SERVICES.items()}
# AWS GPU instance families -> GPU model (canonical names of warehouse/gpu_models.py), used when
# instance_types (aws_pricing) has no row for the type.
GPU_FAMILIES = {
    "p2": "K80",
    "p3": "V100-16GB",
    "p3dn": "V100-32GB",
    "p4d": "A100-40GB",
    "p4de": "A100-80GB",
    "p5": "H100-SXM",
    "p5e": "H200",
    "p5en": "H200",
    "g4dn": "T4",
    "g5": "A10G",
    "g6": "L4",
    "gr6": "L4",
    "g6e": "L40S",
    "g3": "M60",
    "g3s": "M60",
    "g2": "K520",
}
USAGE_TYPE_INSTANCE = r"(?:BoxUsage|SpotUsage|DedicatedUsage|HostUsage|ReservedHostUsage):([a-z0-9-]+\.[a-z0-9-]+)"


def gpu_family_values() -> str:
    """The GPU_FAMILIES table as a SQL VALUES list (family, gpu_model)."""
    return ", ".join(f"({sql_literal(f)}, {sql_literal(m)})" for f, m in sorted(GPU_FAMILIES.items()))
