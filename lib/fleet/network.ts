import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { TrainyardConfig } from '../config';

/** Props for the network. */
export interface NetworkProps {
  /** New VPC settings or the existing VPC to use. */
  readonly network: TrainyardConfig['network'];
  /** Retention of VPC flow logs. */
  readonly logRetention: logs.RetentionDays;
}

/**
 * Where training runs: a new VPC (flow logs, an S3 gateway endpoint so checkpoints don't pay NAT data charges) or an
 * imported one, plus a security group for the compute with no inbound rules.
 */
export class Network extends Construct {
  /** The VPC. */
  public readonly vpc: ec2.IVpc;
  /** Subnets compute environments launch into. */
  public readonly subnets: ec2.SubnetSelection;
  /** The same subnets, selected (budget-watch's spot probe scores only their Availability Zones). */
  public readonly computeSubnets: ec2.ISubnet[];
  /** Whether tasks need a public IP to reach ECR and S3 (true when there is no NAT gateway). */
  public readonly assignPublicIp: boolean;
  /** Security group for Batch instances and Fargate tasks: egress only. */
  public readonly securityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: NetworkProps) {
    super(scope, id);
    const network = props.network;
    if (network.mode === 'existing') {
      this.vpc = ec2.Vpc.fromVpcAttributes(this, 'Vpc', {
        vpcId: network.vpcId,
        availabilityZones: network.subnetIds.map((_, i) => `imported-az-${i}`),
        privateSubnetIds: network.subnetIds,
      });
      this.subnets = {
        subnets: network.subnetIds.map((subnetId) => ec2.Subnet.fromSubnetId(this, subnetId, subnetId)),
      };
      this.assignPublicIp = false;
    } else {
      const privateCompute = network.natGateways > 0;
      // A stack not bound to a region gets two zones from CDK however many maxAzs asks; named zones need no lookup.
      const zones = network.availabilityZones;
      const vpc = new ec2.Vpc(this, 'Vpc', {
        ...(zones ? { availabilityZones: [...zones] } : { maxAzs: network.maxAzs }),
        natGateways: network.natGateways,
        subnetConfiguration: [
          { name: 'Public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20 },
          ...(privateCompute
            ? [{ name: 'Compute', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 18 }]
            : []),
        ],
        gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
      });
      const flowLogs = new logs.LogGroup(this, 'FlowLogs', { retention: props.logRetention });
      const flowLogRole = new iam.Role(this, 'FlowLogRole', {
        assumedBy: new iam.ServicePrincipal('vpc-flow-logs.amazonaws.com'),
      });
      vpc.addFlowLog('FlowLog', {
        destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs, flowLogRole),
        trafficType: ec2.FlowLogTrafficType.ALL,
      });
      this.vpc = vpc;
      this.subnets = { subnetType: privateCompute ? ec2.SubnetType.PRIVATE_WITH_EGRESS : ec2.SubnetType.PUBLIC };
      this.assignPublicIp = !privateCompute;
    }
    this.computeSubnets = this.vpc.selectSubnets(this.subnets).subnets;
    this.securityGroup = new ec2.SecurityGroup(this, 'ComputeSecurityGroup', {
      vpc: this.vpc,
      description: 'Trainyard training compute: no inbound, all outbound (ECR, S3, CloudWatch, IMDS)',
      allowAllOutbound: true,
    });
  }
}
