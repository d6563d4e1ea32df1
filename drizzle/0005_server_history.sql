CREATE TABLE `server_history` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`server` text NOT NULL,
	`at` text NOT NULL,
	`state` text NOT NULL,
	`detail` text,
	`started` integer DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE INDEX `server_history_server_idx` ON `server_history` (`server`,`id`);