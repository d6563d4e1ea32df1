CREATE TABLE "notification_digests" (
	"key" text COLLATE "C" PRIMARY KEY NOT NULL,
	"queued" integer NOT NULL,
	"not_before" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
ALTER TABLE "notification_deliveries" ADD COLUMN "requester" text COLLATE "C";